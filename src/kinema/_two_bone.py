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

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels.constants import ONE_SMALL_SCRATCH
from ._solve import (
    ThreadScratch,
    _rows,
    ancestors_root_first,
    as_target,
    check_uniform_scale,
    entry_point,
    kernel_loader,
    prepare,
    resolve_chain,
    single_pose_copies,
)
from ._validate import as_float_array, broadcast_batch, require_finite, resolve_joint
from .errors import ShapeError, SolverInputError
from .pose import Pose
from .result import SolveResult, single_result
from .skeleton import Skeleton

__all__ = ["solve_two_bone", "solve_two_bone_2d", "TwoBoneIK", "TwoBone2D"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Batches at least this large run the parallel kernel; smaller ones run on
#: one thread (a thread launch costs more than solving a few hundred arms).
PARALLEL_MIN_BATCH = 2048

#: ``end_rotation`` quaternions shorter than this carry no orientation.
ZERO_QUAT_EPS = 1e-12

_F64 = np.dtype(np.float64)
_Z3 = np.zeros(3)  # stand-ins for absent per-item inputs (never written)
_Z4 = np.zeros(4)
_Z3_ROW = np.zeros((1, 3))
_Z4_ROW = np.zeros((1, 4))
_SCALAR = (float, int, np.float64)
_ITER_ONE = np.int64(1)
_LIMITS_ZERO = np.int64(0)

# Option bits shared with the kernel (kept in sync by test_two_bone.py).
_HAS_POLE = 1
_HAS_HINT = 2
_HAS_END_ROTATION = 4
_CONTINUITY = 8


class _Plan:
    """A skeleton's chain for one ``joints`` triple, resolved once and cached."""

    __slots__ = ("skeleton", "anc", "joints", "kl", "nj", "checked", "index")

    def __init__(self, skeleton: Skeleton, joints: Any) -> None:
        items = list(joints) if not isinstance(joints, (str, int, np.integer)) else [joints]
        if len(items) != 3:
            raise SolverInputError(
                f"solve_two_bone needs three joints (upper, lower, end), got {len(items)}: {joints!r}"
            )
        path, _ = resolve_chain(skeleton, items)
        lower = resolve_joint(skeleton, items[1])
        self.skeleton = skeleton
        self.joints: IntArray = np.ascontiguousarray(path, dtype=np.int64)
        self.kl = int(np.nonzero(path == lower)[0][0])
        self.anc: IntArray = np.ascontiguousarray(ancestors_root_first(skeleton, int(path[0])), dtype=np.int64)
        self.nj = skeleton.n_joints
        self.checked: IntArray = np.concatenate([self.anc, self.joints])
        #: ``[kl, n_anc, J, anc..., joints...]``: the single-solve kernel's one index argument.
        self.index: IntArray = np.concatenate([[self.kl, self.anc.size, self.nj], self.anc,
                                               self.joints]).astype(np.int64)


_PLANS: dict[tuple[int, Any], _Plan] = {}
_MAX_PLANS = 256


#: The last plan looked up, with its skeleton and ``joints`` tuple: an animation loop
#: passes the very same objects every frame, so identity finds it without hashing.
_last_plan: tuple[Skeleton, Any, _Plan] | None = None


def _plan(skeleton: Skeleton, joints: Any) -> _Plan:
    global _last_plan
    last = _last_plan
    if last is not None and last[0] is skeleton and last[1] is joints:
        return last[2]
    plan = _plan_lookup(skeleton, joints)
    if type(joints) is tuple:  # immutable: safe to recognise by identity next time
        _last_plan = (skeleton, joints, plan)
    return plan


def _plan_lookup(skeleton: Skeleton, joints: Any) -> _Plan:
    try:
        key = (id(skeleton), joints)
        plan = _PLANS.get(key)
    except TypeError:  # unhashable joints (a list): key on its items
        key = (id(skeleton), tuple(joints))
        plan = _PLANS.get(key)
    if plan is not None and plan.skeleton is skeleton:
        return plan
    plan = _Plan(skeleton, joints)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("two_bone")


def _vec(x: Any, n: int) -> FloatArray | None:
    """``x`` as a C-contiguous float64 ``(n,)`` array for the fast path, or None when it is anything else."""
    if type(x) is not np.ndarray:
        if type(x) not in (list, tuple) or len(x) != n:
            return None
        try:
            x = np.array(x, dtype=np.float64)
        except (TypeError, ValueError):
            return None
    elif x.dtype is not _F64 or x.ndim != 1 or not x.flags.c_contiguous:
        return None
    return x if x.size == n else None  # type: ignore[no-any-return]


#: ``kinema._kernels.two_bone.solve_one``'s compiled entry point, once known
#: (see ``kinema._kernels._jit.entry_point``: the fast path's arguments always
#: have the same kinds, so numba's per-call type dispatch is skipped).
_one_entry: Any = None


def _scratch(n_k: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``solve_one``'s scratch for chains of up to ``n_k`` joints: ``pos (n_k,3), rot (n_k,4), scl (n_k,),
    orig (n_k,4)`` (only chains with twist joints use it)."""
    return np.empty((n_k, 3)), np.empty((n_k, 4)), np.empty(n_k), np.empty((n_k, 4))


#: ``solve_one``'s scratch, per thread.
_SCRATCH = ThreadScratch(_scratch)


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

    Raises :class:`~kinema.SolverInputError` for NaN/inf inputs, options out of
    range, a non-uniform scale on the chain or its ancestors, a zero-length
    bone or a margin above the shorter bone.
    """
    last = _last_plan  # the per-frame call: same skeleton and joints tuple as last time
    plan = last[2] if last is not None and last[0] is skeleton and last[1] is joints else _plan(skeleton, joints)
    if out is None and type(pose) is Pose:
        res = _solve_fast(plan, pose, target, pole, weight, soft, end_rotation, margin, bend_hint, twist_spread,
                          continuity)
        if res is not None:
            return res
    return _solve_general(plan, pose, target, pole, weight, soft, end_rotation, margin, bend_hint, out,
                          twist_spread, continuity)


def _solve_fast(plan: _Plan, pose: Pose, target: Any, pole: Any, weight: Any, soft: Any, end_rotation: Any,
                margin: Any, bend_hint: Any, twist_spread: Any, continuity: Any) -> SolveResult | None:
    """One unbatched pose with plain options, without the generic broadcasting.

    Returns None (the caller takes the general path) for anything else, and
    also when the kernel reports a problem: the general path then validates
    everything and raises the precise error.  Same kernel, same numbers.
    """
    if type(weight) not in _SCALAR or type(soft) not in _SCALAR or type(twist_spread) not in _SCALAR:
        return None
    # The plain per-frame call (no hint, no end rotation) goes to the compiled entry point, which takes 1-D
    # float64 arrays of any strides and whose kernel checks sizes: only the dimensions are checked here.
    # Other calls go through numba's dispatcher, which would compile a version for any new array kind: they
    # get C-contiguous float64 arrays.
    plain = bend_hint is None and end_rotation is None
    tg = target if (plain and type(target) is np.ndarray and target.ndim == 1) else _vec(target, 3)
    if tg is None:
        return None
    flags = _CONTINUITY if continuity else 0
    po: FloatArray | None
    hi: FloatArray | None
    er: FloatArray | None
    if pole is None:
        po = _Z3
    else:
        po = pole if (plain and type(pole) is np.ndarray and pole.ndim == 1) else _vec(pole, 3)
        if po is None:
            return None
        flags |= _HAS_POLE
    if bend_hint is None:
        hi = None
    else:
        hi = _vec(bend_hint, 3)
        if hi is None:
            return None
        flags |= _HAS_HINT
    if end_rotation is None:
        er = None
    else:
        er = _vec(end_rotation, 4)
        if er is None:
            return None
        flags |= _HAS_END_ROTATION
    if margin is None:
        m = -1.0
    elif type(margin) in _SCALAR and margin >= 0.0:
        m = float(margin)
    else:
        return None
    global _one_entry
    copies = single_pose_copies(pose)  # (the kernel checks the joint count)
    if copies is None:
        return None
    t2, r2, s2 = copies
    bend = np.empty(3)
    scratch = _SCRATCH.arrays or _SCRATCH.grow(plan.joints.size)
    args = (plan.index, t2, r2, s2, tg, po, hi, er, flags, float(weight), float(soft), m, float(twist_spread), bend)
    if plain:
        # The plain per-frame call: its own compiled version (no hint, no end rotation: two
        # arguments fewer to convert), called without type dispatch; target and pole (args 4, 5)
        # compiled for any strides.
        if _one_entry is None:
            _one_entry = entry_point(_kernels().solve_one, args + scratch, any_layout=(4, 5))
        kernel = _one_entry
    else:
        kernel = _kernels().solve_one
    try:
        status, err, reached = kernel(*args, *scratch)
    except TypeError:  # an array of another dtype (the entry point converts nothing): the general path
        return None
    if status:
        if status != ONE_SMALL_SCRATCH:
            return None
        # Twist joints: a longer chain than this thread has solved before.
        scratch = _SCRATCH.grow(plan.joints.size)
        status, err, reached = kernel(*args, *scratch)
        if status:
            return None
    return single_result(t2, r2, s2, reached, err, 1, 0, {"bend_direction": bend})


def _option(x: Any, what: str, lo: float, hi: float, hi_open: bool = False) -> FloatArray:
    a = as_float_array(x, what, ())
    require_finite(a, what, SolverInputError)
    bad = (a < lo) | (a >= hi if hi_open else a > hi)
    if np.any(bad):
        v = float(a[bad].flat[0]) if a.ndim else float(a)
        rng = f"[{lo:g}, {hi:g})" if hi_open else f"[{lo:g}, {hi:g}]"
        raise SolverInputError(f"{what} must be in {rng}, got {v:g}")
    return a


def _solve_general(plan: _Plan, pose: Pose, target: Any, pole: Any, weight: Any, soft: Any, end_rotation: Any,
                   margin: Any, bend_hint: Any, out: Pose | None, twist_spread: Any, continuity: Any) -> SolveResult:
    k = _kernels()

    if not isinstance(pose, Pose):
        raise TypeError(f"pose must be a kinema.Pose, got {type(pose).__name__}")
    tg = as_target(target, "target")
    po = None if pole is None else as_target(pole, "pole")
    hi = None if bend_hint is None else as_target(bend_hint, "bend_hint")
    er = None
    if end_rotation is not None:
        er = as_target(end_rotation, "end_rotation", (4,))
        norms = np.linalg.norm(er, axis=-1)
        if np.any(norms <= ZERO_QUAT_EPS):
            raise SolverInputError("end_rotation contains a zero quaternion (no orientation)")
    w = _option(weight, "weight", 0.0, 1.0)
    so = _option(soft, "soft", 0.0, 1.0, hi_open=True)
    m = np.full((), -1.0) if margin is None else _option(margin, "margin", 0.0, np.inf)
    if np.ndim(twist_spread) != 0:
        raise ShapeError("twist_spread", "a scalar", tuple(np.shape(twist_spread)))
    spread = float(_option(twist_spread, "twist_spread", 0.0, 1.0))
    flags = (_HAS_POLE if po is not None else 0) | (_HAS_HINT if hi is not None else 0) \
        | (_HAS_END_ROTATION if er is not None else 0) | (_CONTINUITY if continuity else 0)

    shapes = [pose.batch_shape, tg.shape[:-1], w.shape, so.shape, m.shape]
    shapes += [x.shape[:-1] for x in (po, hi, er) if x is not None]
    batch = broadcast_batch(*shapes)
    prep = prepare(plan.skeleton, pose, [(np.broadcast_to(tg, batch + (3,)), (3,))], out, rotations_only=True)
    n = prep.n
    po_r = _Z3_ROW if po is None else _rows(po, batch, n, (3,))
    hi_r = _Z3_ROW if hi is None else _rows(hi, batch, n, (3,))
    er_r = _Z4_ROW if er is None else _rows(er, batch, n, (4,))
    err = np.empty(n)
    reached = np.empty(n, dtype=np.bool_)
    bend = np.empty((n, 3))
    status = np.empty(n, dtype=np.int64)
    kern = k.solve_batch if n >= PARALLEL_MIN_BATCH else k.solve_serial
    kern(plan.anc, plan.joints, plan.kl, prep.t, prep.r, prep.s, prep.extras[0], po_r, hi_r, er_r, flags,
         _rows(w, batch, n, ()), _rows(so, batch, n, ()), _rows(m, batch, n, ()), spread,
         pose.batch_shape == () and out is not pose, err, reached, bend, status)
    if np.any(status):
        _raise_status(plan, pose, status, batch)
    if batch:
        return SolveResult(
            pose=prep.out,
            reached=reached.reshape(batch),
            error=err.reshape(batch),
            iterations=np.ones(batch, dtype=np.int64),
            limits_hit=np.zeros(batch, dtype=np.int64),
            state={"bend_direction": bend.reshape(batch + (3,))},
        )
    return SolveResult(pose=prep.out, reached=reached[0], error=err[0], iterations=_ITER_ONE,
                       limits_hit=_LIMITS_ZERO, state={"bend_direction": bend.reshape(3)})


def _raise_status(plan: _Plan, pose: Pose, status: IntArray, batch: tuple[int, ...]) -> None:
    k = _kernels()

    first = int(np.nonzero(status)[0][0])
    code = int(status[first])
    where = f"batch item {np.unravel_index(first, batch) if batch else ()}"
    names = plan.skeleton.names
    upper, lower, end = names[plan.joints[0]], names[plan.joints[plan.kl]], names[plan.joints[-1]]
    if code == k.NONUNIFORM_SCALE:
        check_uniform_scale(plan.skeleton, pose, plan.checked, "solve_two_bone")
        msg = "a joint on the chain or above it has a non-uniform scale; the chain needs uniform scale"
    elif code == k.ZERO_BONE:
        msg = f"bone {upper!r}->{lower!r} or {lower!r}->{end!r} has zero length ({where}): the chain cannot bend"
    elif code == k.MARGIN_TOO_LARGE:
        msg = f"margin is larger than the shorter bone of {upper!r}->{lower!r}->{end!r} ({where})"
    elif code == k.BAD_POSE:
        msg = f"pose has NaN or inf on the chain {upper!r}->{end!r} or its ancestors ({where})"
    else:
        msg = f"invalid input ({where}, kernel status {code})"
    raise SolverInputError(msg)


class TwoBoneIK:
    """Two-bone IK for animation loops: holds the chain, the pole and the last bend direction.

    Each :meth:`solve` feeds the previous frame's bend direction back as
    ``bend_hint`` with ``continuity=True`` (see :func:`solve_two_bone`), so
    the elbow keeps its side frame to frame: no flip when the target crosses
    the pole axis or when the pole degenerates.  :meth:`reset` forgets the
    history (the next solve follows the pole exactly); so does changing the
    batch shape.

    Example::

        ik = kinema.TwoBoneIK(skeleton, ("upperarm", "forearm", "hand"), pole=elbow_pole)
        for frame_pose, grip in zip(clip_poses, grips):
            posed = ik.solve(frame_pose, grip).pose
    """

    def __init__(
        self,
        skeleton: Skeleton,
        joints: Any,
        pole: ArrayLike | None = None,
        *,
        soft: float = 0.0,
        margin: float | None = None,
        twist_spread: float = 0.0,
        continuity: bool = True,
    ) -> None:
        self.skeleton = skeleton
        self.joints = tuple(joints)
        _plan(skeleton, self.joints)  # validate the chain now
        self.pole = pole
        self.soft = soft
        self.margin = margin
        self.twist_spread = twist_spread
        self.continuity = continuity
        self.bend_direction: FloatArray | None = None

    @property
    def pole(self) -> FloatArray | None:
        """World pole point ``(3,)`` or ``(*batch, 3)``, or None (a copy of what was set)."""
        return self._pole

    @pole.setter
    def pole(self, value: ArrayLike | None) -> None:
        self._pole = None if value is None else as_target(value, "pole").copy()

    def reset(self) -> None:
        """Forget the last bend direction."""
        self.bend_direction = None

    def solve(self, pose: Pose, target: ArrayLike, *, weight: ArrayLike = 1.0,
              end_rotation: ArrayLike | None = None, out: Pose | None = None) -> SolveResult:
        """Solve one frame (see :func:`solve_two_bone`) and remember its bend direction."""
        hint = self.bend_direction
        if hint is not None and hint.shape[:-1] != _batch_of(pose, target):
            hint = None  # the batch changed: the old history does not apply
        res = solve_two_bone(self.skeleton, pose, self.joints, target, self._pole, weight=weight, soft=self.soft,
                             end_rotation=end_rotation, margin=self.margin, bend_hint=hint, out=out,
                             twist_spread=self.twist_spread, continuity=self.continuity)
        self.bend_direction = res.state["bend_direction"]
        return res


def _batch_of(pose: Pose, target: ArrayLike) -> tuple[int, ...]:
    if (type(target) is np.ndarray and target.ndim == 1 and pose.translations.ndim == 2
            and pose.rotations.ndim == 2 and pose.scales.ndim == 2):
        return ()  # one pose, one target: the per-frame case, without broadcasting shapes
    return broadcast_batch(pose.batch_shape, np.shape(target)[:-1])


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
    batch = broadcast_batch(ro.shape[:-1], tg.shape[:-1], a1.shape, a2.shape, bd.shape, m.shape, so.shape)
    n = int(np.prod(batch)) if batch else 1
    elbow = np.empty((n, 2))
    end = np.empty((n, 2))
    angles = np.empty((n, 2))
    err = np.empty(n)
    status = np.empty(n, dtype=np.int64)
    kern = k.solve_2d_batch if n >= PARALLEL_MIN_BATCH else k.solve_2d_serial
    kern(_rows(ro, batch, n, (2,)), _rows(tg, batch, n, (2,)), _rows(a1, batch, n, ()), _rows(a2, batch, n, ()),
         _rows(bd, batch, n, ()), _rows(m, batch, n, ()), _rows(so, batch, n, ()), elbow, end, angles, err, status)
    if np.any(status):
        first = int(np.nonzero(status)[0][0])
        where = np.unravel_index(first, batch) if batch else ()
        if int(status[first]) == k.MARGIN_TOO_LARGE:
            raise SolverInputError(f"margin is larger than the shorter bone (batch item {where})")
        raise SolverInputError(f"degenerate bone lengths (batch item {where})")
    length = np.broadcast_to(a1 + a2, batch).reshape(n)
    reached = err <= k.REACH_RTOL * length
    if not batch:
        return TwoBone2D(elbow[0], end[0], angles[0, 0], angles[0, 1], reached[0], err[0])
    return TwoBone2D(elbow.reshape(batch + (2,)), end.reshape(batch + (2,)), angles[:, 0].reshape(batch),
                     angles[:, 1].reshape(batch), reached.reshape(batch), err.reshape(batch))
