"""Analytic two-bone IK: an upper bone, a lower bone and an end (arm, leg), in 3D and 2D.

The maths (all in world space, so any parent transform and any bone axis works):

* shoulder ``A``, elbow ``B``, end ``C`` from forward kinematics; bone
  lengths ``a = |B - A|``, ``b = |C - B|``;
* reach: ``d = |T - A|`` clamped to ``[|a - b| + margin, a + b - margin]``
  (optionally eased by the soft-reach curve, see ``soft``); the end goes to
  ``C* = A + d u`` with ``u`` the unit shoulder-to-target direction;
* bend plane: unit ``v`` perpendicular to ``u`` from the pole (see ``pole``);
* elbow (law of cosines): ``along = (a^2 + d^2 - b^2) / (2 d)``,
  ``rise = sqrt(max(0, a^2 - along^2))``, ``B* = A + along u + rise v``;
* the upper bone turns by the minimal world rotation taking ``B - A`` to
  ``B* - A``, left-multiplied onto its world rotation and converted to local
  through the parent's inverse; the chain's world positions are refreshed and
  the lower bone turns the same way from ``C - B`` to ``C* - B``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import (
    ABSENT_ROW3,
    SOLVERS,
    OneItemOutputs,
    PackedChain,
    _rows,
    ancestors_root_first,
    as_target,
    check_pose_item,
    check_twist,
    item_pose,
    item_row,
    kernel_loader,
    pose_batch,
    pose_shapes,
    prepare,
    raise_status,
    resolve_chain,
    result,
    run_driver,
)
from ._types import FloatArray, IntArray
from ._validate import (
    as_float_array,
    broadcast_batch,
    check_flag,
    is_sequence,
    not_sequence_text,
    positive_number,
    require_finite,
    resolve_joint,
)
from .errors import ShapeError, SolverInputError
from .limits import Hinge, Limit, limit_map
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton, check_skeleton

__all__ = ["TwoBone", "solve_two_bone", "solve_two_bone_2d", "TwoBoneIK", "TwoBone2D"]


_Z4_ROW = np.zeros((1, 4))  # the stand-in for an absent end rotation (never read)
_ONES = np.ones(1)
_ZEROS = np.zeros(1)
_NO_MARGIN = np.full(1, -1.0)  # margin < 0: the kernel's default
_ONE = np.int64(1)  # an unbatched result's iteration count

# Option bits shared with the kernel (kept in sync by test_two_bone.py).
_HAS_POLE = 1
_HAS_HINT = 2
_HAS_END_ROTATION = 4
_CONTINUITY = 8
_HAS_HINGE = 16
_SMOOTH = 32
_REST_TWIST = 64
_SHARED_KEY = 128  # not a kernel bit: marks a ``_options`` entry whose ``shared`` slot is set

# Layout of the kernel's packed float ``params`` row (kept in sync by test_motion_two_bone.py): the
# lower joint's hinge (9), the upper and lower joints' rest local rotations (4 + 4), the bend step.
_P_HINGE = 0
_P_REST_UPPER = 9
_P_REST_LOWER = 13
_P_BEND_STEP = 17
_P_SPREAD = 18
_P_FLAGS = 19
_P_SHARED = 20
_P_SIZE = 21

#: Columns of the kernel's per-item history row (smooth history mode; kept in sync by the same test).
_HIST_SIZE = 8
_NO_HIST = np.zeros((1, _HIST_SIZE))  # zero: no previous frame (the kernel reads nothing moved)

#: Smooth history mode: radians per second the bend plane may turn toward the pole's plane on top of
#: what the target's and the pole's own motion allow (how fast it settles when nothing moves).
DEFAULT_BEND_SPEED = 1.0

#: Seconds per frame assumed by smooth history mode when a solve gives no ``dt`` (60 frames per second).
DEFAULT_FRAME_SECONDS = 1.0 / 60.0

#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("two_bone")


def _option(x: Any, what: str, lo: float, hi: float, hi_open: bool = False) -> FloatArray:
    a = as_float_array(x, what, ())
    require_finite(a, what, SolverInputError)
    bad = (a < lo) | (a >= hi if hi_open else a > hi)
    if np.any(bad):
        v = float(a[bad].flat[0]) if a.ndim else float(a)
        rng = f"[{lo:g}, {hi:g})" if hi_open else f"[{lo:g}, {hi:g}]"
        raise SolverInputError(f"{what} must be in {rng}, got {v:g}")
    return a


def _scalar_option(x: Any, what: str, lo: float, hi: float, hi_open: bool = False) -> float:
    a = as_float_array(x, what, ())
    if a.ndim != 0:
        raise ShapeError(what, "a scalar", tuple(a.shape))
    return float(_option(a, what, lo, hi, hi_open))


def _joint_items(joints: Any) -> list[Any]:
    """The three joints of a two-bone chain as a list, read once (a generator is taken as the list it yields);
    :class:`SolverInputError` when ``joints`` is not three joints."""
    items: list[Any] | None
    if isinstance(joints, (str, int, np.integer)):
        items = [joints]
    elif isinstance(joints, np.ndarray) and joints.ndim == 0:
        items = [joints[()]]
    elif is_sequence(joints):
        items = list(joints)
    else:
        items = None
    if items is None:
        raise SolverInputError(f"solve_two_bone needs three joints (upper, lower, end) in a sequence, got "
                               f"{not_sequence_text(joints)}")
    if len(items) != 3:
        raise SolverInputError(f"solve_two_bone needs three joints (upper, lower, end), got {len(items)}: {joints!r}")
    return items


class TwoBone(PackedChain):
    """A prepared two-bone solver for one arm or leg: validate once, solve every frame.

    ``TwoBone(skeleton, joints, *, pole=None, soft=0.0, margin=None,
    twist_spread=0.0, continuity=False, history=False, limits=None,
    smooth=False, bend_speed=DEFAULT_BEND_SPEED, twist="input")``: ``joints``
    the three joints ``(upper, lower, end)``; the options mean what they mean
    for :func:`solve_two_bone` (whose docstring has the maths) and are the
    defaults of every :meth:`solve`.  With ``history=True`` each solve feeds
    the previous frame's bend direction back as ``bend_hint`` with
    ``continuity`` on, so the elbow keeps its side frame to frame
    (:class:`TwoBoneIK` is this mode); :meth:`reset` forgets it.

    ``smooth=True`` (with ``history=True``) makes the bend plane follow the
    pole without pops near the pole axis: outside a cone of 15 degrees about
    the shoulder-to-pole axis it aims at the pole's plane exactly; inside it
    the aim turns from the plane where the target entered to the plane where
    it is predicted to leave (its path taken as straight), the short way
    round (keeping the elbow's side or following the pole round, with
    hysteresis on that choice); and the bend direction follows the aim at a
    limited rate: per frame at most ``4 (dtheta_target + dtheta_pole) /
    sin(beta)`` radians (the angles the shoulder-to-target and
    shoulder-to-pole directions turned, ``beta`` the elbow's angle off the
    shoulder-to-end line: the plane's turn moves the elbow at most four
    times as far as the target's own motion) plus ``bend_speed`` (rad/s)
    times the frame's ``dt``.  The target is reached exactly as without it.
    The history is per batch item.

    ``twist="rest"``: each moved bone's twist about its own axis is taken
    from the rest pose relative to its parent (see :func:`solve_two_bone`).

    The options may be set after construction (``ik.soft = 0.1``): each is
    checked as the constructor checks it and has the constructor's effect
    (``history=True`` turns ``continuity`` on; changing ``history`` or
    ``smooth`` forgets the recorded history, as a new solver has none).
    ``limits`` too (it reads back the mapping given, or None).  ``skeleton``
    and ``joints`` are read-only: they are packed into the kernel's plan.
    """

    what = "solve_two_bone"
    cache_options = ("twist_spread", "continuity", "limits", "twist")

    def __init__(self, skeleton: Skeleton, joints: Any, *, pole: ArrayLike | None = None, soft: float = 0.0,
                 margin: float | None = None, twist_spread: float = 0.0, continuity: bool = False,
                 history: bool = False, limits: Mapping[Any, Limit] | None = None, smooth: bool = False,
                 bend_speed: float = DEFAULT_BEND_SPEED, twist: str = "input") -> None:
        check_skeleton(skeleton)
        items = _joint_items(joints)
        path, _ = resolve_chain(skeleton, items)
        lower = resolve_joint(skeleton, items[1])
        self._skeleton = skeleton
        #: The joints as given (a generator read once), for :class:`TwoBoneIK`'s ``joints_spec``.
        self._joints_given = tuple(items)
        self._pose_shapes = pose_shapes(skeleton)
        self._joints = np.ascontiguousarray(path, dtype=np.int64)
        self._joints.flags.writeable = False
        kl = int(np.nonzero(path == lower)[0][0])
        anc = ancestors_root_first(skeleton, int(path[0]))
        self.scale_joints = np.concatenate([anc, self._joints]).astype(np.int64)
        #: ``[kl, n_anc, anc..., joints...]``: the kernel's packed plan.
        self._plan = np.concatenate([[kl, anc.size], anc, self._joints]).astype(np.int64)
        #: The kernel's packed float options (``_P_*``); the bend step is set per solve (smooth mode).
        self._params = np.zeros(_P_SIZE)
        self._params[_P_REST_UPPER:_P_REST_UPPER + 4] = skeleton.rotations[self._joints[0]]
        self._params[_P_REST_LOWER:_P_REST_LOWER + 4] = skeleton.rotations[self._joints[kl]]
        self._flags = 0
        self._set_limits(limits)
        self.twist = twist
        self.pole = pole
        self.soft = soft
        self.margin = margin
        self.twist_spread = twist_spread
        self.bend_direction: FloatArray | None = None
        #: Smooth mode: the kernel's history rows of the last solve, ``(N, 8)``, or None.
        self._bend_history: FloatArray | None = None
        self._last_history: FloatArray | None = None
        # The modes: ``continuity`` as asked, then the history mode that may turn it on (see ``continuity``).
        self._continuity_asked = check_flag(continuity, "continuity")
        self._history = check_flag(history, "history")
        self._smooth = False
        self.smooth = smooth
        self._set_continuity()
        self.bend_speed = bend_speed

    #: Whether ``history=True`` turns ``continuity`` on (as :class:`TwoBone`'s constructor documents);
    #: :class:`TwoBoneIK`, always in history mode, takes ``continuity`` as given.
    _HISTORY_SETS_CONTINUITY = True

    @property
    def limits(self) -> Mapping[Any, Limit] | None:
        """The limits, as given (a read-only mapping), or None.  Settable: ``{joint: Limit}`` or None, checked as
        the constructor checks it; the solver then solves exactly as one built with it."""
        return None if self._limits is None else MappingProxyType(self._limits)

    @limits.setter
    def limits(self, value: Any) -> None:
        self._set_limits(value)

    def _set_limits(self, limits: Any) -> None:
        """Check and pack ``limits``: the hinge row of the kernel's options and its flag bit."""
        #: ``[axis, min, max, rest rotation]`` of a hinge on the lower joint, or None.
        limits = limit_map(limits)  # (a snapshot: the caller may change its mapping)
        hinge = _hinge_row(self._skeleton, self._joints, int(self._plan[0]), limits)
        self._hinge = hinge
        self._limits = limits
        self._flags = (self._flags & ~_HAS_HINGE) | (_HAS_HINGE if hinge is not None else 0)
        self._params[_P_HINGE:_P_REST_UPPER] = 0.0 if hinge is None else hinge
        #: ``self._params`` with a call's option bits, ``shared`` and the twist spread set, by
        #: ``flags | _SHARED_KEY`` (made once per combination; cleared when the params change).
        self._options: dict[int, FloatArray] = {}

    # The options every solve reads are packed when set: the kernel's flag bits (``_flags``) and (1,) rows
    # for soft and margin, so a solve converts nothing of its own.
    @property
    def twist(self) -> str:
        """The twist policy (see :func:`solve_two_bone`)."""
        return self._twist

    @twist.setter
    def twist(self, value: str) -> None:
        self._twist = check_twist(value)
        self._flags = (self._flags & ~_REST_TWIST) | (_REST_TWIST if self._twist == "rest" else 0)

    @property
    def continuity(self) -> bool:
        """Whether a bend hint picks the side within the pole's plane (see :func:`solve_two_bone`).

        A :class:`TwoBone` in history mode always has it on (``history=True`` turns it on, whatever
        ``continuity`` was set to; ``history=False`` gives back the value set); a :class:`TwoBoneIK` has
        what was set."""
        return bool(self._flags & _CONTINUITY)

    @continuity.setter
    def continuity(self, value: bool) -> None:
        self._continuity_asked = check_flag(value, "continuity")
        self._set_continuity()

    def _set_continuity(self) -> None:
        on = self._continuity_asked or (self._history and self._HISTORY_SETS_CONTINUITY)
        self._flags = (self._flags & ~_CONTINUITY) | (_CONTINUITY if on else 0)

    @property
    def history(self) -> bool:
        """History mode: each solve's bend direction is the next one's ``bend_hint`` (see :class:`TwoBone`).

        Setting it does what the constructor's ``history`` does (``continuity`` on for a :class:`TwoBone`);
        a change forgets the recorded history (:meth:`reset`).  ``False`` is refused while ``smooth`` is on."""
        return self._history

    @history.setter
    def history(self, value: bool) -> None:
        on = check_flag(value, "history")
        if not on and self._smooth:
            raise SolverInputError("smooth=True needs history=True (the smoothing follows the previous frames); set "
                                   "smooth to False first")
        if on != self._history:
            self.reset()
        self._history = on
        self._set_continuity()

    @property
    def smooth(self) -> bool:
        """Smooth history mode (see :class:`TwoBone`); needs ``history``.  A change forgets the recorded history
        (:meth:`reset`), as a solver built with the new value has none."""
        return self._smooth

    @smooth.setter
    def smooth(self, value: bool) -> None:
        on = check_flag(value, "smooth")
        if on and not self._history:
            raise SolverInputError("smooth=True needs history=True (the smoothing follows the previous frames)")
        if on != self._smooth:
            self.reset()
        self._smooth = on

    @property
    def bend_speed(self) -> float:
        """Smooth history mode's catch-up rate of the bend plane, radians per second (a finite number >= 0)."""
        return self._bend_speed

    @bend_speed.setter
    def bend_speed(self, value: float) -> None:
        self._bend_speed = positive_number(value, "bend_speed", allow_zero=True)

    @property
    def soft(self) -> float:
        """Default soft-reach fraction in [0, 1)."""
        return self._soft

    @soft.setter
    def soft(self, value: float) -> None:
        self._soft = _scalar_option(value, "soft", 0.0, 1.0, hi_open=True)
        self._soft_row = _ZEROS if self._soft == 0.0 else np.full(1, self._soft)

    @property
    def margin(self) -> float | None:
        """Default reach margin (world distance), or None for the kernel's default."""
        return self._margin

    @margin.setter
    def margin(self, value: float | None) -> None:
        self._margin = None if value is None else _scalar_option(value, "margin", 0.0, np.inf)
        self._margin_row = _NO_MARGIN if self._margin is None else np.full(1, self._margin)

    @property
    def pole(self) -> FloatArray | None:
        """Default world pole point ``(3,)`` or ``(*batch, 3)``, or None (a copy of what was set)."""
        return self._pole

    @pole.setter
    def pole(self, value: ArrayLike | None) -> None:
        self._pole = None if value is None else as_target(value, "pole").copy()

    @property
    def twist_spread(self) -> float:
        """Default twist spread in [0, 1] (see :func:`solve_two_bone`)."""
        return self._twist_spread

    @twist_spread.setter
    def twist_spread(self, value: float) -> None:
        self._twist_spread = _scalar_option(value, "twist_spread", 0.0, 1.0)
        self._options = {}  # (made again with the new spread)

    def reset(self) -> None:
        """Forget the last bend direction (history mode)."""
        self.bend_direction = None
        self._bend_history = None

    def solve(self, pose: Pose, target: ArrayLike, *, pole: ArrayLike | None = None, weight: ArrayLike = 1.0,
              end_rotation: ArrayLike | None = None, bend_hint: ArrayLike | None = None,
              soft: ArrayLike | None = None, margin: ArrayLike | None = None,
              out: Pose | None = None, dt: float | None = None) -> SolveResult:
        """Solve one frame or a batch (arguments as in :func:`solve_two_bone`; ``pole``, ``soft`` and
        ``margin`` default to the solver's own).  In history mode the previous solve's bend direction is
        the hint unless ``bend_hint`` is given, and this solve's is kept for the next.

        ``dt``: seconds since the previous frame (> 0), read by smooth history mode (the bend plane's
        catch-up is ``bend_speed * dt``); without it a frame is taken as 1/60 s."""
        if not self._history:
            if dt is not None:
                positive_number(dt, "dt")
            return self._run(pose, target, self._pole if pole is None else pole, weight, soft, margin, end_rotation,
                             bend_hint, out)
        step_seconds = DEFAULT_FRAME_SECONDS if dt is None else positive_number(dt, "dt")
        one = check_pose_item(self._skeleton, pose, self.what, self._pose_shapes) and out is None
        x = self._inputs(target, self._pole if pole is None else pole, weight, soft, margin, end_rotation, bend_hint)
        history = None
        if self.bend_direction is not None:
            # the history belongs to the batch of the solve that made it: the whole call's broadcast batch (a
            # batch may come from the pole or an option as well as from the pose and the target)
            if self.bend_direction.shape[:-1] != _batch(pose, one, x):
                self.reset()  # the batch changed: the old history does not apply
            else:
                history = self._bend_history
                if x[2] is None:  # no bend_hint given: the last frame's
                    x = (x[0], x[1], self.bend_direction, *x[3:])
        params = None
        if self._smooth:
            params = self._params.copy()
            params[_P_BEND_STEP] = self._bend_speed * step_seconds
        res = self._run_inputs(pose, one, x, out, params, history)
        self.bend_direction = res.state["bend_direction"]
        if self._smooth:
            self._bend_history = self._last_history
        return res

    def _inputs(self, target: ArrayLike, pole: ArrayLike | None, weight: ArrayLike, soft: ArrayLike | None,
                margin: ArrayLike | None, end_rotation: ArrayLike | None, bend_hint: ArrayLike | None) -> _Inputs:
        """A solve's per-item inputs converted and checked (``soft``, ``margin``: None for the solver's own), and
        the batch shapes of the call's own options: a default (this module's or the solver's (1,) row, one
        value for every item) has none."""
        tg = as_float_array(target, "target", (3,))
        po = None if pole is None else as_float_array(pole, "pole", (3,))
        hi = None if bend_hint is None else as_float_array(bend_hint, "bend_hint", (3,))
        er = None if end_rotation is None else as_float_array(end_rotation, "end_rotation", (4,))
        option_batches: list[tuple[str, tuple[int, ...]]] = []
        if type(weight) is float and weight == 1.0:
            w = _ONES
        else:
            w = _option(weight, "weight", 0.0, 1.0)
            if w.ndim:
                option_batches.append(("weight", w.shape))
        if soft is None:
            so = self._soft_row
        elif type(soft) is float and soft == 0.0:
            so = _ZEROS
        else:
            so = _option(soft, "soft", 0.0, 1.0, hi_open=True)
            if so.ndim:
                option_batches.append(("soft", so.shape))
        if margin is None:
            m = self._margin_row
        else:
            m = _option(margin, "margin", 0.0, np.inf)
            if m.ndim:
                option_batches.append(("margin", m.shape))
        return tg, po, hi, er, w, so, m, option_batches

    def _run(self, pose: Pose, target: ArrayLike, pole: ArrayLike | None, weight: ArrayLike,
             soft: ArrayLike | None, margin: ArrayLike | None, end_rotation: ArrayLike | None,
             bend_hint: ArrayLike | None, out: Pose | None) -> SolveResult:
        """One solve without history.  ``soft``, ``margin``: None for the solver's own."""
        one = check_pose_item(self._skeleton, pose, self.what, self._pose_shapes) and out is None
        return self._run_inputs(pose, one, self._inputs(target, pole, weight, soft, margin, end_rotation, bend_hint),
                                out)

    def _run_inputs(self, pose: Pose, one: bool, x: _Inputs, out: Pose | None, params: FloatArray | None = None,
                    history: FloatArray | None = None) -> SolveResult:
        """One solve of the converted inputs ``x`` (:meth:`_inputs`; ``one``: :func:`check_pose_item`'s answer,
        ``out`` None).  ``params``: the packed options with this frame's bend step (smooth mode only, which it
        switches on); ``history``: the previous frame's history rows ``(1|N, 8)`` (smooth mode)."""
        tg, po, hi, er, w, so, m, option_batches = x
        flags = self._flags | (_HAS_POLE if po is not None else 0) | (_HAS_HINT if hi is not None else 0) \
            | (_HAS_END_ROTATION if er is not None else 0) | (_SMOOTH if params is not None else 0)
        if one and not option_batches and tg.ndim == 1 and (po is None or po.ndim == 1) and \
                (hi is None or hi.ndim == 1) and (er is None or er.ndim == 1):
            # The per-frame call (one item, no option of its own per item): the kernel's rows made directly.
            res, t, r, s = item_pose(pose)
            n, own = 1, True
            batch: tuple[int, ...] = ()
            tg_r = item_row(tg)
            po_r = None if po is None else item_row(po)
            hi_r = None if hi is None else item_row(hi)
            er_r = None if er is None else item_row(er)
        else:
            vectors: list[tuple[FloatArray, tuple[int, ...]]] = [(tg, (3,))]  # broadcast (and copied) by prepare
            names = ["target"]
            for v, tail, name in ((po, (3,), "pole"), (hi, (3,), "bend_hint"), (er, (4,), "end_rotation")):
                if v is not None:
                    vectors.append((v, tail))
                    names.append(name)
            if option_batches:
                # Options with batch dims of their own broadcast with the pose's and the vectors' like every
                # solver's weight (a (1,) weight on one pose is a batch of one): the target is broadcast to the
                # result, since it sets the batch of the output.
                full = broadcast_batch(pose.batch_shape, *[v.shape[:-1] for v, _ in vectors],
                                       *[b for _, b in option_batches],
                                       names=("pose", *names, *[name for name, _ in option_batches]))
                if full and tg.shape[:-1] != full:
                    vectors[0] = (np.broadcast_to(tg, full + (3,)), (3,))
            prep = prepare(self._skeleton, pose, vectors, out, rotations_only=True, checked=True,
                           unbatched=one or None, names=names)
            n, batch, own, res, t, r, s = prep.n, prep.batch, prep.own, prep.out, prep.t, prep.r, prep.s
            rows = iter(prep.extras)
            tg_r = next(rows)
            po_r = None if po is None else next(rows)
            hi_r = None if hi is None else next(rows)
            er_r = None if er is None else next(rows)
        if batch:
            err = np.empty(n)
            reached = np.empty(n, dtype=np.bool_)
            status = np.zeros(n, dtype=np.int64)
            hits = np.zeros(n, dtype=np.int64)
        else:
            err, reached, status, hits = _ONE_ITEM.outputs  # read back as scalars below
        shared = one or (pose_batch(pose) == () and out is not pose)
        bend = np.empty((n, 3))
        hist_in = _NO_HIST if history is None or history.shape[0] != n else history
        hist_out = np.zeros((n, _HIST_SIZE)) if params is not None else _NO_HIST
        # The packed options: the solver's, with this call's option bits and twist spread (made once per
        # combination; smooth mode's per-frame copy is set here).
        key = flags | _SHARED_KEY if shared else flags
        opts = self._options.get(key) if params is None else params
        if opts is None or params is not None:
            if opts is None:
                opts = self._options[key] = self._params.copy()
            opts[_P_FLAGS] = flags
            opts[_P_SHARED] = shared
            opts[_P_SPREAD] = self._twist_spread
        args = (self._plan, opts, t, r, s, tg_r, ABSENT_ROW3 if po_r is None else po_r,
                ABSENT_ROW3 if hi_r is None else hi_r, _Z4_ROW if er_r is None else er_r, hist_in,
                w if w is _ONES else _flat(w, batch, n), so if so is self._soft_row else _flat(so, batch, n),
                m if m is self._margin_row else _flat(m, batch, n),
                err, reached, bend, status, hits, hist_out)
        code = run_driver(_kernels().drivers_for(flags), n, args, own=own)
        if code:
            raise_status(code, self.what, self._skeleton, pose, self.scale_joints,
                         {"target": tg, "pole": po, "bend_hint": hi, "end_rotation": er, "weight": w, "soft": so,
                          "margin": m})
        if status[0] if n == 1 else np.any(status):
            self._raise_item_status(status, batch)
        if params is not None:
            self._last_history = hist_out
        if batch:
            state: dict[str, Any] = {"bend_direction": bend.reshape(batch + (3,)),
                                     "moved": np.broadcast_to(w, batch) > 0.0}
            return result(res, batch, err, reached, np.ones(n, dtype=np.int64), hits, state)
        state = {"bend_direction": bend[0], "moved": np.True_ if w is _ONES else w.reshape(-1)[0] > 0.0}
        return SolveResult._trusted(res, reached[0], err[0], _ONE, hits[0], state)

    def _raise_item_status(self, status: IntArray, batch: tuple[int, ...]) -> None:
        k = _kernels()
        first = int(np.nonzero(status)[0][0])
        code = int(status[first])
        where = f"batch item {np.unravel_index(first, batch) if batch else ()}"
        names = self.skeleton.names
        kl = int(self._plan[0])
        upper, lower, end = names[self.joints[0]], names[self.joints[kl]], names[self.joints[-1]]
        if code == k.ZERO_BONE:
            msg = f"bone {upper!r}->{lower!r} or {lower!r}->{end!r} has zero length ({where}): the chain cannot bend"
        elif code == k.MARGIN_TOO_LARGE:
            msg = f"margin is larger than the shorter bone of {upper!r}->{lower!r}->{end!r} ({where})"
        elif code == k.BAD_END_ROTATION:
            msg = "end_rotation contains a zero quaternion (no orientation)"
        elif code == k.BAD_POSE:
            msg = f"the world transforms of the chain {upper!r}->{end!r} overflow ({where}): pose values too large"
        else:
            msg = f"invalid input ({where}, kernel status {code})"
        raise SolverInputError(msg)


#: A solve's converted inputs (:meth:`TwoBone._inputs`): ``target``, ``pole``, ``bend_hint``, ``end_rotation``
#: (``(*batch, k)`` arrays or None), ``weight``, ``soft``, ``margin`` (``(*batch,)`` arrays, or this module's and
#: the solver's own (1,) default rows) and the names and batch shapes of the options that are not defaults.
_Inputs = tuple[FloatArray, FloatArray | None, FloatArray | None, FloatArray | None, FloatArray, FloatArray,
                FloatArray, list[tuple[str, tuple[int, ...]]]]


def _batch(pose: Pose, one: bool, x: _Inputs) -> tuple[int, ...]:
    """The batch a solve of the inputs ``x`` on ``pose`` has (``one``: the pose is one item and there is no
    ``out``): every per-item input's broadcast with the pose's, as :func:`kinema._solve.prepare` makes it."""
    tg, po, hi, er, _, _, _, option_batches = x
    if one and tg.ndim == 1 and not option_batches and (po is None or po.ndim == 1) and \
            (hi is None or hi.ndim == 1) and (er is None or er.ndim == 1):
        return ()  # the per-frame call
    vectors = [(name, v.shape[:-1]) for v, name in ((po, "pole"), (hi, "bend_hint"), (er, "end_rotation"))
               if v is not None]
    named = [("pose", pose_batch(pose)), ("target", tg.shape[:-1]), *vectors, *option_batches]
    return broadcast_batch(*[b for _, b in named], names=[name for name, _ in named])


#: An unbatched solve's outputs: ``err``, ``reached``, ``status`` and ``hits``, each ``(1,)``.
_ONE_ITEM = OneItemOutputs(lambda: (np.empty(1), np.empty(1, dtype=np.bool_), np.zeros(1, dtype=np.int64),
                                    np.zeros(1, dtype=np.int64)))


def _hinge_row(skeleton: Skeleton, joints: IntArray, kl: int, limits: Mapping[Any, Limit] | None) -> FloatArray | None:
    """The kernel's hinge row for ``limits`` on a two-bone chain, or None when no limit applies to it.

    Two-bone honours one kind of limit exactly: a :class:`~kinema.limits.Hinge` on the lower joint of a plain
    ``(upper, lower, end)`` chain (its angle range becomes a reach range).  Limits of joints outside the
    chain are ignored; any other limit on the chain is refused.
    """
    if limits is None:  # (limit_map's: none, or an empty mapping)
        return None
    on_chain = {}
    seen: set[int] = set()
    for key, lim in limits.items():
        j = resolve_joint(skeleton, key)
        if j in seen:  # (as CCD and FABRIK refuse it: one of the two would silently win)
            raise SolverInputError(f"joint {skeleton.names[j]!r} has two limits (given by name and by index)")
        seen.add(j)
        if not isinstance(lim, Limit):
            raise SolverInputError(f"limit of joint {skeleton.names[j]!r} must be a kinema.limits.Limit, got "
                                   f"{type(lim).__name__}")
        if j in joints:
            on_chain[j] = lim
    if not on_chain:
        return None
    lower = int(joints[kl])
    for j, lim in on_chain.items():
        if j != lower or not isinstance(lim, Hinge):
            raise SolverInputError(
                f"solve_two_bone honours a Hinge on the lower joint {skeleton.names[lower]!r} only, got "
                f"{type(lim).__name__} on {skeleton.names[j]!r}; use CCD, FABRIK or DLS for other limits")
    if joints.size != 3:
        raise SolverInputError("solve_two_bone honours a hinge only on a plain (upper, lower, end) chain, without "
                               "twist joints between them")
    lim = on_chain[lower]
    assert isinstance(lim, Hinge)
    return np.concatenate([np.asarray(lim.axis), [lim.min_angle, lim.max_angle],
                           skeleton.rotations[lower]]).astype(np.float64)


def _own_rows(a: FloatArray, batch: tuple[int, ...], n: int, tail: tuple[int, ...]) -> FloatArray:
    """A per-item input as ``(1, *tail)`` or ``(N, *tail)``, always a C-contiguous float64 array of the solver's
    own (never a view of the caller's array: see ``kinema._solve.run_driver``'s ``own``)."""
    rows = _rows(a, batch, n, tail)
    return np.array(rows, dtype=np.float64, order="C") if rows.base is not None or rows is a else rows


def _flat(a: FloatArray, batch: tuple[int, ...], n: int) -> FloatArray:
    """A per-item option as ``(1,)`` (one value for all) or ``(N,)``, the solver's own array."""
    if a is _ONES or a is _ZEROS or a is _NO_MARGIN:
        return a  # the defaults: this module's own (1,) arrays, never written
    if a.shape == (1,) or a.ndim == 0:
        return np.array(a, dtype=np.float64, order="C").reshape(1)
    return _own_rows(a, batch, n, ())


def solve_two_bone(
    skeleton: Skeleton,
    pose: Pose,
    joints: Any,
    target: ArrayLike,
    pole: ArrayLike | None = None,
    *,
    weight: ArrayLike = 1.0,
    soft: ArrayLike = 0.0,
    end_rotation: ArrayLike | None = None,
    margin: ArrayLike | None = None,
    bend_hint: ArrayLike | None = None,
    out: Pose | None = None,
    twist_spread: float = 0.0,
    continuity: bool = False,
    limits: Mapping[Any, Limit] | None = None,
    twist: str = "input",
) -> SolveResult:
    """Place an upper bone, a lower bone and an end joint so the end reaches ``target``.

    Parameters (``*batch`` dims broadcast together; units are the skeleton's):

    * ``joints``: three names or indices ``(upper, lower, end)``, each below
      the previous one.  **Twist bones** (or any helper joints) between upper
      and lower or between lower and end are supported: they ride along
      rigidly, bone lengths are measured between the three named joints' world
      positions, and only the named joints turn (plus, with ``twist_spread``,
      the joints between lower and end).
    * ``target``: ``(*batch, 3)`` world position for the end joint.
    * ``pole``: ``(*batch, 3)`` world *point* the elbow bends toward: the bend
      plane's direction is the component of ``pole - shoulder`` perpendicular
      to the shoulder-target axis.  When the pole is absent or lies on that
      axis (within ``BEND_PERP_RTOL``), the fallbacks are, in order: the
      current elbow's perpendicular component (so without a pole the current
      bend plane is kept), then ``bend_hint``, then the world axis least
      aligned with the target direction.
    * ``weight``: ``(*batch,)`` in [0, 1]; each turned joint's local rotation
      is ``slerp(input, solved, weight)``.
    * ``soft``: ``(*batch,)`` in [0, 1).  With ``lo, hi`` the reach limits and
      ``ds = soft (hi - lo)``, a target at distance ``d > d0 = hi - ds``
      places the end at ``d0 + ds (1 - exp(-(d - d0) / ds))`` from the
      shoulder: same value and slope at ``d0``, tending to ``hi``, so the arm
      eases out straight instead of snapping (C1 in the target).
    * ``end_rotation``: ``(*batch, 4)`` xyzw world orientation for the end
      joint, set after the arm is placed (the end's position is unchanged).
    * ``margin``: ``(*batch,)`` world distance kept from the straight and
      folded limits: the shoulder-to-end distance is clamped to
      ``[|a-b| + margin, a+b - margin]``; default ``1e-4 * min(a, b)``; more
      than ``min(a, b)`` is an error.  Clamped targets give ``reached`` False
      and an end on the shoulder-target line.  A target on the shoulder
      reaches along the current shoulder-to-end direction (then the upper
      bone's).
    * ``bend_hint``: ``(*batch, 3)`` world direction, usually the previous
      frame's ``state["bend_direction"]``.
    * ``out``: a caller-owned :class:`~kinema.Pose` of the full batch shape
      (C-contiguous) to write into; the input pose is never modified otherwise.
      Without ``out`` the result is a new pose whose rotations have the full
      batch shape; translations and scales (which this solver never changes)
      are copies of the input's, unbatched if they were (a
      :class:`~kinema.Pose` broadcasts them), not repeated per item.
    * ``twist_spread``: in [0, 1], with ``end_rotation`` only: this fraction
      of the end's twist about the lower-to-end axis is moved onto the lower
      joint and the twist joints between lower and end (shared evenly), so a
      forearm twists along with the wrist; the end still gets exactly
      ``end_rotation``.
    * ``continuity``: when True and ``bend_hint`` is given, the pole sets the
      bend *plane* while the hint picks the side within it, and within
      ``POLE_FADE_SINE`` of the pole axis the plane eases from the hint toward
      the pole's.  The elbow then never flips as the target crosses the pole
      axis (it stays on the side it was on); the hint also comes before the
      current elbow in the fallbacks.  :class:`TwoBoneIK` uses this.

    Returns a :class:`~kinema.SolveResult`: ``error`` is the distance from
    the end to the requested (not the clamped) target, ``reached`` is
    ``error <= 1e-9 (a + b)``, ``state["bend_direction"]`` ``(*batch, 3)`` the
    unit bend direction used (feed it back as ``bend_hint``).  Unbatched
    inputs give numpy scalars.

    * ``limits``: ``{joint: Limit}``; a :class:`~kinema.limits.Hinge` on the
      lower joint of a plain three-joint chain is honoured exactly: the
      lower joint's rest-relative rotation is a turn about the hinge axis
      within its range, the range becomes a reach range (a target beyond it
      gives the closest end on the shoulder-target line, ``reached`` False,
      ``limits_hit`` 1), and the upper joint twists so the elbow bends toward
      the pole.  Other limits on the chain are refused; limits of other
      joints are ignored.
    * ``twist``: ``"input"`` (the default) turns each bone by the smallest
      rotation from the input pose, keeping whatever twist about the bone it
      had; ``"rest"`` then replaces the upper and the lower bone's twist
      about their own axes (toward the next named joint) by the rest pose's,
      relative to the parent (the kernels' ``qrest_twist``), so
      the result depends only on where the joints end up and a warm-started
      loop of targets comes back to the same pose.  The joints do not move;
      the end joint's rotation is handled as with ``"input"``.  With a hinge
      the bones have no free twist and both policies agree.

    Raises :class:`~kinema.SolverInputError` for NaN/inf inputs, options out of
    range, a non-uniform scale on the chain or its ancestors, a zero-length
    bone or a margin above the shorter bone.
    """
    solver = SOLVERS.get(TwoBone, skeleton, (joints, twist_spread, continuity, limits, twist),
                         (type(joints), type(twist_spread), type(continuity), type(limits), type(twist)))
    return solver._run(pose, target, pole, weight, soft, margin, end_rotation, bend_hint, out)


class TwoBoneIK(TwoBone):
    """Two-bone IK for animation loops: :class:`TwoBone` with its history mode on.

    Each :meth:`solve` feeds the previous frame's bend direction back as
    ``bend_hint`` with ``continuity=True`` (see :func:`solve_two_bone`), so
    the elbow keeps its side frame to frame: no flip when the target crosses
    the pole axis or when the pole degenerates.  :meth:`reset` forgets the
    history (the next solve follows the pole exactly); so does changing the
    batch shape.  ``smooth=True`` also turns the bend plane smoothly near the
    pole axis (see :class:`TwoBone`; pass each frame's ``dt`` to
    :meth:`~TwoBone.solve`).

    Example::

        ik = kinema.TwoBoneIK(skeleton, ("upperarm", "forearm", "hand"), pole=elbow_pole)
        for frame_pose, grip in zip(clip_poses, grips):
            posed = ik.solve(frame_pose, grip).pose
    """

    def __init__(self, skeleton: Skeleton, joints: Any, pole: ArrayLike | None = None, *, soft: float = 0.0,
                 margin: float | None = None, twist_spread: float = 0.0, continuity: bool = True,
                 smooth: bool = False, bend_speed: float = DEFAULT_BEND_SPEED, twist: str = "input") -> None:
        super().__init__(skeleton, joints, pole=pole, soft=soft, margin=margin, twist_spread=twist_spread,
                         continuity=continuity, history=True, smooth=smooth, bend_speed=bend_speed, twist=twist)
        #: The joints as given (names or indices).
        self.joints_spec = self._joints_given

    _HISTORY_SETS_CONTINUITY = False


# ------------------------------------------------------------------------ 2D
class TwoBone2D(NamedTuple):
    """Result of :func:`solve_two_bone_2d` (a named tuple).

    * ``elbow``, ``end``: ``(*batch, 2)`` positions.
    * ``angle1``, ``angle2``: ``(*batch,)`` absolute angles of the upper and
      lower bone, radians counter-clockwise from +x:
      ``elbow = root + l1 (cos angle1, sin angle1)``,
      ``end = elbow + l2 (cos angle2, sin angle2)``.
    * ``reached``: ``(*batch,)`` end within ``1e-9 (l1 + l2)`` of the target.
    * ``error``: ``(*batch,)`` distance from the end to the target.
    """

    elbow: FloatArray
    end: FloatArray
    angle1: FloatArray
    angle2: FloatArray
    reached: NDArray[np.bool_]
    error: FloatArray


def solve_two_bone_2d(
    root: ArrayLike,
    target: ArrayLike,
    l1: ArrayLike,
    l2: ArrayLike,
    bend: ArrayLike = 1,
    *,
    margin: ArrayLike | None = None,
    soft: ArrayLike = 0.0,
) -> TwoBone2D:
    """A planar two-bone arm from ``root`` reaching for ``target`` (a mouse-following arm).

    ``root, target (*batch, 2)``; bone lengths ``l1, l2 (*batch,)`` > 0;
    ``bend (*batch,)`` is +1 (elbow on the counter-clockwise side of the
    root-to-target line, with y up) or -1.  Reach rules as in
    :func:`solve_two_bone`: the root-to-end distance is clamped to
    ``[|l1 - l2| + margin, l1 + l2 - margin]`` (default margin
    ``1e-4 min(l1, l2)``; the folded limit is clamped, never snapped), ``soft``
    eases the straight limit, and a target on the root reaches along +x.
    Upper-bone angle: ``angle1 = base + bend atan2(rise, along)`` with
    ``base`` the target's direction and ``along, rise`` from the law of
    cosines; ``angle2 = base - bend atan2(rise, d - along)``.
    """
    k = _kernels()

    ro = as_target(root, "root", (2,))
    tg = as_target(target, "target", (2,))
    a1 = _option(l1, "l1", 0.0, np.inf)
    a2 = _option(l2, "l2", 0.0, np.inf)
    if np.any(a1 <= 0.0) or np.any(a2 <= 0.0):
        raise SolverInputError("bone lengths l1 and l2 must be positive")
    bd = as_float_array(bend, "bend", ())
    if not np.all((bd == 1.0) | (bd == -1.0)):
        raise SolverInputError("bend must be +1 or -1")
    m = np.full((), -1.0) if margin is None else _option(margin, "margin", 0.0, np.inf)
    so = _option(soft, "soft", 0.0, 1.0, hi_open=True)
    batch = broadcast_batch(ro.shape[:-1], tg.shape[:-1], a1.shape, a2.shape, bd.shape, m.shape, so.shape,
                            names=("root", "target", "l1", "l2", "bend", "margin", "soft"))
    n = int(np.prod(batch)) if batch else 1
    elbow = np.empty((n, 2))
    end = np.empty((n, 2))
    angles = np.empty((n, 2))
    err = np.empty(n)
    status = np.empty(n, dtype=np.int64)
    run_driver(k.DRIVERS_2D, n, (_rows(ro, batch, n, (2,)), _rows(tg, batch, n, (2,)), _rows(a1, batch, n, ()),
                                 _rows(a2, batch, n, ()), _rows(bd, batch, n, ()), _rows(m, batch, n, ()),
                                 _rows(so, batch, n, ()), elbow, end, angles, err, status))
    if np.any(status):
        first = int(np.nonzero(status)[0][0])
        where = np.unravel_index(first, batch) if batch else ()
        if int(status[first]) == k.MARGIN_TOO_LARGE:
            raise SolverInputError(f"margin is larger than the shorter bone (batch item {where})")
        if int(status[first]) == k.NONFINITE_RESULT:
            raise SolverInputError(f"solve_two_bone_2d: the result overflows float64 (batch item {where}): the root, "
                                   "the target or the arm reach beyond 1.8e308")
        raise SolverInputError(f"degenerate bone lengths (batch item {where})")
    with np.errstate(over="ignore"):
        length = a1 + a2
    # the reach tolerance of lengths whose sum overflows, without the sum
    tol = np.where(np.isfinite(length), k.REACH_RTOL * length, k.REACH_RTOL * a1 + k.REACH_RTOL * a2)
    reached = err <= np.broadcast_to(tol, batch).reshape(n)
    if not batch:
        return TwoBone2D(elbow[0], end[0], angles[0, 0], angles[0, 1], reached[0], err[0])
    return TwoBone2D(elbow.reshape(batch + (2,)), end.reshape(batch + (2,)), angles[:, 0].reshape(batch),
                     angles[:, 1].reshape(batch), reached.reshape(batch), err.reshape(batch))
