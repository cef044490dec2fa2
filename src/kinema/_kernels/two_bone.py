"""Analytic two-bone IK kernels (3D chains and the 2D arm).

One per-item solve, :func:`_solve_item` (its pure steps
:func:`_arm_lengths` and :func:`_arm_geometry`: reach, bend plane, law of
cosines), is the only implementation of the maths; the shared drivers
(:mod:`.drivers`: :func:`solve_parallel`, chunks of the batch over threads,
and :func:`solve_serial`, single solves and small batches) run it through
:func:`_solve_range`.  With
``NUMBA_DISABLE_JIT=1`` the same functions run as plain Python.

Array conventions follow :mod:`kinema._kernels.chain`: ``t (Nt,J,3)``,
``r (N,J,4)`` (the output rotations, edited in place), ``s (Ns,J,3)``;
per-item inputs have 1 or ``N`` rows and item ``i`` reads row ``i % rows``.

Chain layout: ``joints (K,)`` is the parent path upper ... lower ... end
(``joints[0]`` the upper joint, ``joints[kl]`` the lower one,
``joints[K-1]`` the end); ``anc`` the upper joint's ancestors, root first.
Joints strictly between the three ride along rigidly (twist bones).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .chain import (
    all_finite,
    chain_world,
    input_status,
    item_finite,
    parent_world_rot,
    path_world,
    rotate_world,
    set_world_rot,
)
from .constants import DEFAULT_MARGIN_FRACTION, NONFINITE_INPUT, NONFINITE_RESULT, OK, ZERO_QUAT_EPS
from .drivers import Drivers, make_drivers, specialise
from .limits import LIMIT_HINGE, apply_limit
from .quat import (
    hypot,
    qconj,
    qfrom_axis_angle,
    qfrom_two_vectors,
    qmul,
    qnormalize,
    qrest_twist,
    qrotate,
    qslerp,
    qswing_twist,
    twist_angle,
    vcross,
    vdot,
    vmagnitude,
    vnorm,
    vnormalized,
)

# ----------------------------------------------------------------- constants
#: A bone shorter than this fraction of ``a + b`` is degenerate (the chain
#: cannot bend); the solve reports it instead of dividing by ~0.
DEGENERATE_BONE_RTOL = 1e-12

#: A target closer to the shoulder than this fraction of ``a + b`` gives no
#: direction; the current shoulder-to-end, then upper-bone direction is used.
TARGET_ON_SHOULDER_RTOL = 1e-12

#: A bend candidate (pole, elbow, hint) whose component perpendicular to the
#: shoulder-target axis is shorter than this fraction of its length lies on
#: the axis and gives no bend plane; the next fallback is tried.
BEND_PERP_RTOL = 1e-9

#: A perpendicular part shorter than this fraction of its vector lost digits
#: to cancellation; it is projected off the axis a second time.
REORTHO_RTOL = 1e-3

#: ``continuity`` mode: within this sine of the angle between the pole and
#: the shoulder-target axis (about 23.6 degrees) the pole's pull on the bend
#: plane fades out smoothly (smoothstep of sine / POLE_FADE_SINE), so a
#: target passing through or close to the pole axis does not whip the elbow
#: round.  Narrower cones leave a lag that is caught up abruptly on the way
#: out (measured: 0.25 gives 5-26x median per-frame elbow steps on near
#: misses, 0.4 gives at most 3x within 1 degree of the axis).
POLE_FADE_SINE = 0.4

#: ``reached`` is true when the end is within this fraction of ``a + b`` of
#: the requested target.
REACH_RTOL = 1e-9

#: The upper bone's roll reference (:func:`_upper_turn`) adds the input arm's own bend plane to the plane of
#: the upper bone and the pole, weighted by ``sin^2(bend) / INPUT_BEND_SINE``: the two count alike
#: at a bend whose sine is this (about 11.5 degrees), a bent arm's own plane dominates, and a straight arm's
#: (its direction only jitter) hardly counts (1e-5 of the pole's at a 0.1 degree bend).
INPUT_BEND_SINE = 0.2

#: The same reference counts the input end's offset across the upper bone's line (sine ``s`` of the
#: shoulder-to-end line's angle off the bone) with the weight ``s^2 / (s^2 + (END_LINE_SINE tilt)^2)``,
#: ``tilt`` the sine of the pole's angle out of the input arm's plane: fully on a bent arm and on a pose
#: the solver made (the pole in its plane), hardly on a straight arm whose end only jitters about the
#: bone's line (about 1e-2 at s = 1e-3).
END_LINE_SINE = 0.01

# ``SMOOTH`` history mode (issue 18): the bend plane aims at the pole's plane outside a cone about the
# shoulder-to-pole axis, inside it turns from the plane at the entry to the plane at the predicted
# exit the short way round, and the bend direction follows that aim at a limited rate.

#: Sine of the cone's half-angle (15 degrees): outside it the aim is the pole's plane exactly, so the
#: elbow is back in the pole's plane as soon as the target is more than 15 degrees from the pole axis.
POLE_CONE_SINE = math.sin(math.radians(15.0))

#: The rate limit: a frame turns the bend plane by at most ``BEND_RATE_GAIN * step / sin(beta)``
#: radians (plus ``bend_step``), ``step`` the angles the shoulder-to-target and shoulder-to-pole
#: directions turned since the last frame (summed) and ``beta`` the elbow's angle off the
#: shoulder-to-end line, so the elbow moves at most ``BEND_RATE_GAIN`` times as far from the plane's
#: turn as from the target's and the pole's own motion.
#: The aim never needs more than about 4.2 (a straight path 10.6 degrees from the pole axis).
BEND_RATE_GAIN = 4.0

#: ``sin(beta)`` below this (an arm almost straight) does not limit the turn further: the elbow sits on
#: the shoulder-to-end line and a turn of the plane hardly moves it.
SINE_BETA_FLOOR = 1e-6

#: Inside the cone the aim passes through the target's direction of travel (the elbow keeps its
#: side, the bend plane turns by ``2 eps``) when the predicted closest approach is below
#: ``POLE_CONE_SINE / sqrt(2)``, else through its normal (the elbow follows the pole round, turning
#: ``pi - 2 eps``): whichever turns less.  Once made, the choice changes only when the predicted
#: closest approach crosses that bound by this fraction (hysteresis: a wavering path does not flip it).
AIM_CHOICE_BAND = 0.15

#: Hysteresis on the side the bend direction turns toward: within this many radians of the
#: ambiguous quarter turn it keeps turning the way it turned last frame.
TURN_HYSTERESIS = math.radians(10.0)

#: A target that moved less than this (sine units, about the pole axis) gives no direction of travel:
#: inside the cone the bend direction is held.
TRAVEL_EPS = 1e-12

#: Columns of the per-item history row ``hist (1|N, HIST_SIZE)``: the previous frame's unit
#: shoulder-to-target and shoulder-to-pole directions (zero: none yet, nothing moved), the sign of
#: its bend-plane turn and its aim choice (+1 keep the side, -1 follow the pole round, 0 outside the cone).
HIST_U = 0
HIST_P = 3
HIST_TURN = 6
HIST_CHOICE = 7
HIST_SIZE = 8

# Layout of the packed float options ``params``: the lower joint's hinge ``[axis, min, max, rest rotation]``
# (read with ``HAS_HINGE``), the upper and lower joints' rest local rotations (``REST_TWIST``), the
# bend plane's catch-up per frame in radians (``SMOOTH``: the solver's bend speed times ``dt``), the
# twist spread, the option bits ``flags`` and ``shared`` (1: every item starts from the same pose), the
# last two as exact floats: one array, one argument.
P_HINGE = 0
P_REST_UPPER = 9
P_REST_LOWER = 13
P_BEND_STEP = 17
P_SPREAD = 18
P_FLAGS = 19
P_SHARED = 20
P_SIZE = 21


# Option bits in ``flags``.
HAS_POLE = 1
HAS_HINT = 2
HAS_END_ROTATION = 4
CONTINUITY = 8
HAS_HINGE = 16
SMOOTH = 32  # rate-limited history mode: reads ``hist`` (with HAS_HINT), writes ``hist_out``
REST_TWIST = 64  # twist="rest": each moved bone's twist about its own axis from the rest pose

# Feature switches of the per-item code: each option's branch is written ``if WITH_X and flags & X:``.  True
# here (DRIVERS compile every option); the copies behind DRIVERS_BASIC (drivers.specialise) have them False,
# and numba drops a branch on a False global before typing, so they compile none of that code.
WITH_HINGE = True
WITH_HINT = True  # a bend hint: continuity's side and the fallbacks (history mode)
WITH_SMOOTH = True
WITH_REST_TWIST = True

#: The option bits whose code only DRIVERS compile (:func:`drivers_for`); ``CONTINUITY`` acts only with a hint.
FULL_ONLY = HAS_HINGE | HAS_HINT | SMOOTH | REST_TWIST

#: Hinge angles within this many radians outside their range count as inside (the limits' LIMIT_SLACK).
HINGE_SLACK = 1e-12

#: With a hinge, a reach that varies by less than this fraction of the squared arm length over the angle
#: (the end on the hinge axis) cannot be steered by the angle: the current angle is kept.
HINGE_DEGENERATE_RTOL = 1e-12

# Status codes, one per item, after the shared ones of :mod:`.constants` (0 = solved,
# NONFINITE_INPUT, NONUNIFORM_SCALE).  The public API turns them into SolverInputError messages.
BAD_END_ROTATION = 4  # a zero quaternion
ZERO_BONE = 5
MARGIN_TOO_LARGE = 6
BAD_POSE = 7  # the chain's world transforms overflow (finite inputs, e.g. a scale of 1e300)


# ------------------------------------------------------------------ helpers
@njit(inline=True)
def _finite3(v):  # type: ignore[no-untyped-def]
    return math.isfinite(v[0]) and math.isfinite(v[1]) and math.isfinite(v[2])


@njit(helper=True)
def _perp(x, u):  # type: ignore[no-untyped-def]
    """Component of ``x`` perpendicular to the unit ``u``: ``x - u (x . u)``."""
    k = vdot(x, u)
    return (x[0] - u[0] * k, x[1] - u[1] * k, x[2] - u[2] * k)


@njit(helper=True)
def _perp_unit(x, u, ref):  # type: ignore[no-untyped-def]
    """``(unit(x - u (x . u)), True)`` when that perpendicular part is longer than ``BEND_PERP_RTOL * ref``,
    else ``((0, 0, 0), False)``.

    When ``x`` is nearly along ``u`` the subtraction cancels: the part left
    is short and its rounding error (~1e-16 ``|x|``) is no longer small
    against it, so it keeps a component along ``u`` (1e-9 of it for ``x``
    6e-8 rad off the axis, which put the end 3e-9 off the target).  Below
    ``REORTHO_RTOL * |x|`` the part is projected off ``u`` once more
    ("twice is enough"), which leaves it perpendicular to rounding.
    """
    p = _perp(x, u)
    n = vnorm(p)
    if not (n > BEND_PERP_RTOL * ref and n > 0.0):
        return (0.0, 0.0, 0.0), False
    if n < REORTHO_RTOL * vnorm(x):
        p = _perp(p, u)
        n = vnorm(p)
    return (p[0] / n, p[1] / n, p[2] / n), True


@njit(helper=True)
def reach_distance(d, lo, hi, soft):  # type: ignore[no-untyped-def]
    """Shoulder-to-end distance actually used for a target at distance ``d``.

    Hard reach: ``clamp(d, lo, hi)``.  Soft reach (``soft`` in (0, 1)) with
    ``ds = soft (hi - lo)`` and ``d0 = hi - ds``: for ``d > d0``

        ``d' = d0 + ds (1 - exp(-(d - d0) / ds))``

    which matches ``d`` in value and slope (1) at ``d0`` (C1) and tends to
    ``hi`` as ``d`` grows, so the end eases toward full extension instead of
    snapping straight.  ``lo`` is always a hard clamp.
    """
    if d < lo:
        d = lo
    ds = soft * (hi - lo)
    if soft > 0.0 and ds > 0.0:
        d0 = hi - ds
        if d > d0:
            return d0 + ds * (1.0 - math.exp(-(d - d0) / ds))
        return d
    if d > hi:
        return hi
    return d


# --------------------------------------------------------------- the solve
@njit(inline=True)
def _check_item(erot, flags):  # type: ignore[no-untyped-def]
    """Status of one item's ``end_rotation`` (its finiteness was checked by the driver): ``OK`` or a zero
    quaternion.  The options' ranges are checked once, by :class:`kinema.TwoBone`, before any kernel runs."""
    if flags & HAS_END_ROTATION:
        if math.sqrt(erot[0] * erot[0] + erot[1] * erot[1] + erot[2] * erot[2] + erot[3] * erot[3]) <= ZERO_QUAT_EPS:
            return BAD_END_ROTATION
    return OK


@njit(inline=True)
def _arm_lengths(pa, pb, pc, margin):  # type: ignore[no-untyped-def]
    """``(status, a, b, lo, hi)``: bone lengths and the reach interval ``[lo, hi]`` of the shoulder-to-end distance.

    ``a = |pb - pa|``, ``b = |pc - pb|``, ``lo = |a - b| + m``,
    ``hi = a + b - m`` with ``m`` the margin (``margin < 0``: the default
    ``DEFAULT_MARGIN_FRACTION * min(a, b)``).  Status ``BAD_POSE``,
    ``ZERO_BONE`` or ``MARGIN_TOO_LARGE`` when they make no arm.
    """
    a = vnorm((pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]))
    b = vnorm((pc[0] - pb[0], pc[1] - pb[1], pc[2] - pb[2]))
    if not (_finite3(pa) and math.isfinite(a) and math.isfinite(b)):
        return BAD_POSE, a, b, 0.0, 0.0
    length = a + b
    if a <= DEGENERATE_BONE_RTOL * length or b <= DEGENERATE_BONE_RTOL * length:
        return ZERO_BONE, a, b, 0.0, 0.0
    m = margin
    if m < 0.0:
        m = DEFAULT_MARGIN_FRACTION * min(a, b)
    if m > min(a, b):
        return MARGIN_TOO_LARGE, a, b, 0.0, 0.0
    return OK, a, b, abs(a - b) + m, length - m


@njit(helper=True)
def _angle(x, y):  # type: ignore[no-untyped-def]
    """Radians between two vectors (atan2 form: accurate for tiny angles)."""
    return math.atan2(vnorm(vcross(x, y)), vdot(x, y))


@njit(helper=True)
def _smooth_aim(u, p, h, u_prev, choice, pole_line):  # type: ignore[no-untyped-def]
    """``(aim, choice)``: the unit line (perpendicular to ``u``) the bend direction heads for this frame.

    ``u`` the unit shoulder-to-target direction, ``p`` the unit shoulder-to-pole one, ``h`` the
    previous bend direction made perpendicular to ``u``, ``u_prev`` the previous frame's ``u``,
    ``pole_line`` the pole's bend direction.  Outside the cone (``POLE_CONE_SINE``) the aim is
    ``pole_line``.  Inside, with ``x = perp(u, p)`` (the target's offset from the pole axis, of length
    the sine of its angle from it) moving along ``e`` (from ``u_prev``), the path is predicted straight:
    ``x = t e + delta n`` (``n = p x e``), entering the cone at ``t = -T`` and leaving at ``t = T``
    (``T = sqrt(sin^2 cone - delta^2)``), where the pole's plane makes the angle ``-eps`` and ``eps =
    atan2(delta, T)`` with ``e``.  The aim turns linearly in ``t`` from one to the other: through ``e``
    (``theta = eps t / T``: keep the side) or through ``n`` (follow the pole round), whichever turns less
    (``choice`` +1 or -1, with the hysteresis ``AIM_CHOICE_BAND``); so it meets the pole's plane exactly
    on the cone and turns at most about 4.2 radians per radian of travel.  A target not moving inside
    the cone holds the bend direction.
    """
    x = _perp(u, p)
    if vnorm(x) >= POLE_CONE_SINE:
        return pole_line, 0.0
    xp = _perp(u_prev, p)
    dx = (x[0] - xp[0], x[1] - xp[1], x[2] - xp[2])
    ndx = vnorm(dx)
    if not ndx > TRAVEL_EPS:
        return h, choice
    e = (dx[0] / ndx, dx[1] / ndx, dx[2] / ndx)
    n = vcross(p, e)
    delta = vdot(x, n)
    t = vdot(x, e)
    half = math.sqrt(max(0.0, POLE_CONE_SINE * POLE_CONE_SINE - delta * delta))
    eps = math.atan2(delta, half)
    bound = POLE_CONE_SINE / math.sqrt(2.0)
    if choice == 0.0:
        choice = 1.0 if abs(delta) < bound else -1.0
    elif choice > 0.0 and abs(delta) > bound * (1.0 + AIM_CHOICE_BAND):
        choice = -1.0
    elif choice < 0.0 and abs(delta) < bound * (1.0 - AIM_CHOICE_BAND):
        choice = 1.0
    f = min(1.0, max(-1.0, t / half)) if half > 0.0 else 0.0
    if choice > 0.0:
        theta = eps * f
    else:
        theta = math.copysign(1.0, delta) * (0.5 * math.pi - (0.5 * math.pi - abs(eps)) * f)
    c = math.cos(theta)
    sn = math.sin(theta)
    chart = (e[0] * c + n[0] * sn, e[1] * c + n[1] * sn, e[2] * c + n[2] * sn)
    aim, ok = _perp_unit(chart, u, 1.0)
    if not ok:
        return h, choice
    return aim, choice


@njit(helper=True)
def _smooth_bend(u, w, h, hist, sin_beta, bend_step, pole_line):  # type: ignore[no-untyped-def]
    """``(v, p, turn, choice)``: the rate-limited bend direction of ``SMOOTH`` history mode (``p`` the unit
    shoulder-to-pole direction).

    ``h`` the previous bend direction made perpendicular to ``u`` (unit), ``w`` the shoulder-to-pole
    vector, ``hist`` the previous frame's row (``HIST_*``), ``sin_beta`` the sine of the elbow's angle off
    the shoulder-to-end line, ``bend_step`` the catch-up allowed per frame whatever moved (radians).
    The side of the aim line (:func:`_smooth_aim`) nearer ``h`` is the goal, except within
    ``TURN_HYSTERESIS`` of a quarter turn, where the last frame's turning direction is kept; ``v`` turns
    about ``u`` toward it by at most ``BEND_RATE_GAIN * (angle(u_prev, u) + angle(p_prev, p)) / sin_beta +
    bend_step`` and is the goal exactly when that reaches it.
    """
    u_prev = (hist[HIST_U], hist[HIST_U + 1], hist[HIST_U + 2])
    p_prev = (hist[HIST_P], hist[HIST_P + 1], hist[HIST_P + 2])
    turn = hist[HIST_TURN]
    nw = vnorm(w)
    p = (w[0] / nw, w[1] / nw, w[2] / nw)
    if vnorm(u_prev) == 0.0:
        u_prev = u  # no previous frame (a bend_hint alone): nothing moved
    if vnorm(p_prev) == 0.0:
        p_prev = p
    aim, choice = _smooth_aim(u, p, h, u_prev, hist[HIST_CHOICE], pole_line)
    uh = vcross(u, h)
    side = 1.0 if vdot(h, aim) >= 0.0 else -1.0
    goal = (side * aim[0], side * aim[1], side * aim[2])
    dd = math.atan2(vdot(uh, goal), vdot(h, goal))  # in [-pi/2, pi/2]: the nearer side
    if abs(dd) > 0.5 * math.pi - TURN_HYSTERESIS and turn * dd < 0.0:
        side = -side  # keep turning the way it turned: the far side, the long way round
        goal = (-goal[0], -goal[1], -goal[2])
        dd = dd - math.copysign(math.pi, dd)
    allow = BEND_RATE_GAIN * (_angle(u_prev, u) + _angle(p_prev, p)) / max(sin_beta, SINE_BETA_FLOOR) + bend_step
    if abs(dd) <= allow:
        v = goal
    else:
        step = math.copysign(allow, dd)
        c = math.cos(step)
        sn = math.sin(step)
        v = (h[0] * c + uh[0] * sn, h[1] * c + uh[1] * sn, h[2] * c + uh[2] * sn)
    if dd != 0.0:
        turn = math.copysign(1.0, dd)
    return v, p, turn, choice


@njit(helper=True)
def _arm_geometry(pa, pb, pc, a, b, lo, hi, tgt, pole, hint, flags, soft, hist, bend_step):  # type: ignore[no-untyped-def]
    """Where the elbow and the end go, from the shoulder, elbow and end world positions ``pa, pb, pc``.

    ``a, b, lo, hi`` from :func:`_arm_lengths`; ``hist`` the previous frame's history row and
    ``bend_step`` the catch-up per frame (both read with ``SMOOTH``).  Returns ``(v, elbow, end,
    hist_row)``: the unit bend direction ``v``, the world points ``elbow = B*``, ``end = C*`` (reach
    clamp, pole and its fallbacks, law of cosines; see the public docstring) and this frame's history
    row ``(u, pole direction, turn, choice)`` (``HIST_*``).  Pure tuple maths, shared by every item solve.
    """
    zero3 = (0.0, 0.0, 0.0)
    ab = (pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2])
    length = a + b

    # Direction to the target.  Target on the shoulder: no direction, so keep
    # the current shoulder-to-end one, and if the arm is folded flat onto the
    # shoulder too, the upper bone's.
    dt = (tgt[0] - pa[0], tgt[1] - pa[1], tgt[2] - pa[2])
    d = vnorm(dt)
    if d > TARGET_ON_SHOULDER_RTOL * length:
        u = (dt[0] / d, dt[1] / d, dt[2] / d)
    else:
        ac = (pc[0] - pa[0], pc[1] - pa[1], pc[2] - pa[2])
        nac = vnorm(ac)
        if nac > TARGET_ON_SHOULDER_RTOL * length:
            u = (ac[0] / nac, ac[1] / nac, ac[2] / nac)
        else:
            u = (ab[0] / a, ab[1] / a, ab[2] / a)
    dc = reach_distance(d, lo, hi, soft)

    # Law of cosines: elbow at ``along`` on the axis and ``rise`` off it.
    if dc > 0.0:
        along = (a * a + dc * dc - b * b) / (2.0 * dc)
    else:
        along = 0.0  # margin=0, a == b, target on the shoulder: fully folded, elbow straight out along v
    rise = math.sqrt(max(0.0, a * a - along * along))

    # Bend direction v (unit, perpendicular to u).
    v, ok = zero3, False
    h, hok = zero3, False
    turn = 0.0
    choice = 0.0
    p_dir = zero3
    # ``ref``: the shoulder-to-pole vector when a pole pins the bend plane (directly, or through continuity's
    # and smooth mode's hint), zero otherwise: :func:`_upper_turn` refers the upper bone's roll to it.  A hint
    # alone is not a reference: it is the previous frame's result, which turns with the solve.
    ref = zero3
    if WITH_HINT and flags & HAS_HINT:
        h, hok = _perp_unit(hint, u, vnorm(hint))
    if flags & HAS_POLE:
        w = (pole[0] - pa[0], pole[1] - pa[1], pole[2] - pa[2])
        nw = vnorm(w)
        pw = _perp(w, u)
        v, ok = _perp_unit(w, u, nw)
        ref = w
        if WITH_SMOOTH and (flags & SMOOTH) and nw > 0.0:
            p_dir = (w[0] / nw, w[1] / nw, w[2] / nw)
        if WITH_SMOOTH and (flags & SMOOTH) and hok and nw > 0.0:
            v, p_dir, turn, choice = _smooth_bend(u, w, h, hist, rise / a, bend_step, v if ok else h)
            ok = True
        elif WITH_HINT and ok and (flags & CONTINUITY) and hok:
            # The pole fixes the bend *plane*, the previous bend picks the side
            # in it (no flip as the target crosses the pole axis), and near
            # the axis the pole's pull fades so the plane cannot whip round.
            # Work with the doubled angle 2 theta between h and the pole's
            # line (the same for +v and -v): blend it with 0 (keep h) by the
            # fade weight alpha as unit vectors, then halve.  alpha = 1 gives
            # the pole's line exactly (the side nearer h); for alpha < 1/2
            # the result is continuous in every input.
            x = min(1.0, vnorm(pw) / (POLE_FADE_SINE * nw))
            alpha = x * x * (3.0 - 2.0 * x)
            uh = vcross(u, h)
            two = 2.0 * math.atan2(vdot(uh, v), vdot(h, v))
            theta = 0.5 * math.atan2(alpha * math.sin(two), (1.0 - alpha) + alpha * math.cos(two))
            c = math.cos(theta)
            sn = math.sin(theta)
            v = (h[0] * c + uh[0] * sn, h[1] * c + uh[1] * sn, h[2] * c + uh[2] * sn)
    if WITH_HINT and not ok and (flags & CONTINUITY) and hok:
        v, ok = h, True  # continuity: the previous frame's bend before the current elbow
    if not ok:
        # Pole absent or on the axis: keep the current bend plane.
        v, ok = _perp_unit(ab, u, a)
        ref = zero3  # the plane is the input's own (the shortest arc turns about its normal)
    if WITH_HINT and not ok and hok:
        v, ok = h, True  # arm straight along the axis: the previous frame's bend
    if not ok:
        # Last resort: the world axis least aligned with u, made perpendicular.
        ax = abs(u[0])
        ay = abs(u[1])
        az = abs(u[2])
        if ax <= ay and ax <= az:
            e = (1.0, 0.0, 0.0)
        elif ay <= az:
            e = (0.0, 1.0, 0.0)
        else:
            e = (0.0, 0.0, 1.0)
        v, ok = _perp_unit(e, u, 1.0)

    elbow = (pa[0] + u[0] * along + v[0] * rise, pa[1] + u[1] * along + v[1] * rise,
             pa[2] + u[2] * along + v[2] * rise)
    end = (pa[0] + u[0] * dc, pa[1] + u[1] * dc, pa[2] + u[2] * dc)
    return v, elbow, end, (u[0], u[1], u[2], p_dir[0], p_dir[1], p_dir[2], turn, choice), ref


@njit(helper=True)
def _upper_turn(ab, bc, to_elbow, u, v, ref):  # type: ignore[no-untyped-def]
    """The upper bone's world correction: it takes the input upper bone ``ab`` onto ``to_elbow``.

    Without a pole pinning the bend plane (``ref`` zero: the current plane kept, or a hint's) it is the
    shortest arc, which turns about the kept plane's normal.  When a pole pins the plane (``ref`` the
    shoulder-to-pole vector), the shortest arc's roll about the bone is not continuous near a half turn:
    its axis spins round as ``to_elbow`` passes ``-ab``, a pop of the bone's roll (and the lower bone's)
    while the elbow moves a little.  The correction is then the rotation that takes the input frame
    (bone, a reference normal ``m0``) to the solved one (bone, ``v x u``: the solved ``to_elbow x (end -
    elbow)`` direction, ``u`` the unit shoulder-to-end line), continuous wherever the pinned plane is.

    ``m0`` is the normal the input arm bent toward ``ref`` about its shoulder-to-end line ``c`` would have
    (``ref x c`` made perpendicular to the bone, ``END_LINE_SINE``), plus the input arm's own bend normal
    (``ab x bc``, whose plane the lower bone then turns in) weighted by its bend (``INPUT_BEND_SINE``).  A
    solved pose solved again has both along ``v x u``: nothing moves.  ``m0`` vanishes for a straight
    input arm with ``ref`` along it, an input folded flat onto the shoulder, or an input bent away from
    ``ref`` by just the weight that cancels it: no plane to refer the roll to, the shortest arc is kept.
    Written as the shortest arc then a roll about the bone, so the bone's direction is the shortest arc's.
    """
    dq = qfrom_two_vectors(ab, to_elbow)
    nr = vnorm(ref)
    if nr == 0.0:
        return dq  # nothing pinned the plane
    na = vnorm(ab)
    nb = vnorm(bc)
    ah = (ab[0] / na, ab[1] / na, ab[2] / na)
    n_in = vcross(ah, (bc[0] / nb, bc[1] / nb, bc[2] / nb))  # the input's bend normal, |n_in| = sin(bend)
    # Bent toward ref about the shoulder-to-end line c (unit): ref x c, made perpendicular to the bone, is
    # cos(g) ref x ab + perp(ref x c_perp), g the angle of c off the bone and c_perp = c - cos(g) ab.  The
    # second part is kept with the weight s^2 / (s^2 + (END_LINE_SINE tilt)^2), s = sin(g) = |c_perp| and
    # tilt the sine of ref's angle out of the input arm's plane: an end jittering about the bone's line of
    # a straight arm hardly turns the reference, and a solved pose (ref in its plane) keeps all of it, so
    # solving it again leaves it as it is.  All of it is scaled by
    # |ac| / (a + b): an end on or near the shoulder (folded flat, a == b) gives no line, so it fades out
    # (both parts vanish there: the shortest arc below).
    ac = (ab[0] + bc[0], ab[1] + bc[1], ab[2] + bc[2])
    nc = vnorm(ac)
    rh = (ref[0] / nr, ref[1] / nr, ref[2] / nr)
    n_ref = (0.0, 0.0, 0.0)
    if nc > 0.0:
        ch = (ac[0] / nc, ac[1] / nc, ac[2] / nc)
        cos_g = vdot(ch, ah)
        c_perp = (ch[0] - cos_g * ah[0], ch[1] - cos_g * ah[1], ch[2] - cos_g * ah[2])
        s2 = vdot(c_perp, c_perp)
        tilt = vdot(rh, vcross(ah, c_perp))  # ref out of the input arm's plane (0 on a solved pose), times s
        s4 = s2 * s2
        h = s4 / (s4 + END_LINE_SINE * END_LINE_SINE * tilt * tilt) if s4 > 0.0 else 0.0
        n_a = vcross(rh, ah)
        n_p = _perp(vcross(rh, c_perp), ah)
        f = nc / (na + nb)
        n_ref = (f * (cos_g * n_a[0] + h * n_p[0]), f * (cos_g * n_a[1] + h * n_p[1]),
                 f * (cos_g * n_a[2] + h * n_p[2]))
    k = vnorm(n_in) / INPUT_BEND_SINE
    m0 = (n_ref[0] + k * n_in[0], n_ref[1] + k * n_in[1], n_ref[2] + k * n_in[2])
    nm = vnorm(m0)
    if not nm > BEND_PERP_RTOL:
        return dq  # no reference plane (see above): the shortest arc
    n1 = vcross(v, u)  # unit: v is perpendicular to the unit u
    e = vnormalized(to_elbow)
    m = qrotate(dq, (m0[0] / nm, m0[1] / nm, m0[2] / nm))
    psi = math.atan2(vdot(e, vcross(m, n1)), vdot(m, n1))
    return qmul(qfrom_axis_angle(e, psi), dq)


@njit(helper=True)
def _in_range(x, lo, hi):  # type: ignore[no-untyped-def]
    """``x + 2 pi k`` for the ``k`` that puts it in ``[lo, hi]`` (a range within [-pi, pi]), and whether one does."""
    y = lo + (x - lo) % (2.0 * math.pi)
    return y, y <= hi + HINGE_SLACK


@njit(borrows=True, helper=True)
def _hinge_arm(pa, rot_a, s_a, t_l, s_l, t_e, q_l, params, base_rot, lo, hi, tgt, pole, hint, flags, soft, pb,
               pc, a, b, hist, bend_step):  # type: ignore[no-untyped-def]
    """A plain arm whose lower joint is a hinge: ``(upper local, lower local, bend direction, hit, history
    row)``, exact.

    In the upper joint's frame (rotation ``rot_a``, world scale ``s_a``) the
    shoulder-to-end vector is ``a_vec + s_B rest (R(n, theta) e)`` with
    ``a_vec = s_a t_l``, ``e = t_e``, ``s_B = s_a s_l`` and ``rest, n`` the
    hinge's rest rotation and axis; its squared length is
    ``K + P cos(theta) + S sin(theta) = K + M cos(theta - phi)``.  The reach
    interval is that of the hinge range (intersected with the margin's);
    :func:`_arm_geometry` gives the end's distance ``dc`` and the bend
    direction ``v``; ``theta`` solves ``d(theta) = dc`` (of the two roots,
    the one in range nearest the current angle); the upper joint then turns
    the end onto the target line and twists about it so the elbow points
    along ``v``.  The lower joint's rest-relative rotation is exactly
    ``R(n, theta)`` with ``theta`` in range.  ``hit``: the hinge range, not
    the target, set the reach.
    """
    n = (params[P_HINGE], params[P_HINGE + 1], params[P_HINGE + 2])
    tmin = params[P_HINGE + 3]
    tmax = params[P_HINGE + 4]
    rest = (params[P_HINGE + 5], params[P_HINGE + 6], params[P_HINGE + 7], params[P_HINGE + 8])
    a_vec = (s_a * t_l[0], s_a * t_l[1], s_a * t_l[2])
    s_b = s_a * s_l
    en = vdot(t_e, n)
    e_par = (n[0] * en, n[1] * en, n[2] * en)
    e_perp = (t_e[0] - e_par[0], t_e[1] - e_par[1], t_e[2] - e_par[2])
    e_x = vcross(n, e_perp)
    a_r = qrotate(qconj(rest), a_vec)
    k0 = vdot(a_vec, a_vec) + s_b * s_b * vdot(t_e, t_e) + 2.0 * s_b * vdot(a_r, e_par)
    pp = 2.0 * s_b * vdot(a_r, e_perp)
    ss = 2.0 * s_b * vdot(a_r, e_x)
    m = math.sqrt(pp * pp + ss * ss)
    phi = math.atan2(ss, pp)
    theta_cur = twist_angle(qswing_twist(qmul(qconj(rest), qnormalize(q_l)), n)[1], n)
    # Reach interval of the hinge range: the extremes of cos(theta - phi) on [tmin, tmax].
    c_lo = math.cos(tmin - phi)
    c_hi = math.cos(tmax - phi)
    f_max = 1.0 if _in_range(phi, tmin, tmax)[1] else max(c_lo, c_hi)
    f_min = -1.0 if _in_range(phi + math.pi, tmin, tmax)[1] else min(c_lo, c_hi)
    d_lo = math.sqrt(max(0.0, k0 + m * f_min))
    d_hi = math.sqrt(max(0.0, k0 + m * f_max))
    lo2 = max(lo, d_lo)
    hi2 = min(hi, d_hi)
    if lo2 > hi2:  # the margin leaves nothing of the hinge's reach: its nearest end
        lo2 = d_hi if lo > d_hi else d_lo
        hi2 = lo2
    v, elbow, end, hrow = _arm_geometry(pa, pb, pc, a, b, lo2, hi2, tgt, pole, hint, flags, soft, hist,
                                        bend_step)[:4]
    dv = (end[0] - pa[0], end[1] - pa[1], end[2] - pa[2])
    dc = vnorm(dv)
    d_tgt = vnorm((tgt[0] - pa[0], tgt[1] - pa[1], tgt[2] - pa[2]))
    hit = (d_tgt > hi2 and hi2 < hi) or (d_tgt < lo2 and lo2 > lo)
    if m <= HINGE_DEGENERATE_RTOL * k0:
        # The reach does not depend on the angle (the end on the hinge axis): keep the current one, in range.
        theta = min(max(theta_cur, tmin), tmax)
    else:
        c = min(1.0, max(-1.0, (dc * dc - k0) / m))
        al = math.acos(c)
        best = math.inf
        theta = min(max(theta_cur, tmin), tmax)
        for cand in (phi + al, phi - al):
            y, ok = _in_range(cand, tmin, tmax)
            if ok:
                y = min(max(y, tmin), tmax)
                gap = abs(_in_range(y - theta_cur, -math.pi, math.pi)[0])
                if gap < best:
                    best = gap
                    theta = y
        if best == math.inf:
            # No root in range: dc is in the range's reach interval, so one is there in exact arithmetic, but at
            # a reach extreme acos amplifies rounding and both roots can land just outside.  The range end whose
            # reach is nearest dc is that root (the current angle kept instead made the same out-of-reach target
            # solve differently with the character moved by a few metres).
            theta = tmin if abs(k0 + m * c_lo - dc * dc) <= abs(k0 + m * c_hi - dc * dc) else tmax
    q_lower = qnormalize(qmul(rest, qfrom_axis_angle(n, theta)))
    # The end in the upper joint's frame, then the upper joint's world rotation.
    c_u = qrotate(q_lower, t_e)
    c_u = (a_vec[0] + s_b * c_u[0], a_vec[1] + s_b * c_u[1], a_vec[2] + s_b * c_u[2])
    if dc > 0.0:
        u = (dv[0] / dc, dv[1] / dc, dv[2] / dc)
    else:
        u = vnormalized(qrotate(rot_a, c_u))  # the end on the shoulder: no line to put it on
    q1 = qmul(qfrom_two_vectors(qrotate(rot_a, c_u), u), rot_a)
    b1 = qrotate(q1, a_vec)
    k = vdot(b1, u)
    bp = (b1[0] - u[0] * k, b1[1] - u[1] * k, b1[2] - u[2] * k)
    psi = 0.0
    if vnorm(bp) > BEND_PERP_RTOL * vnorm(b1):  # an elbow on the line (straight arm) has no side to turn to
        psi = math.atan2(vdot(u, vcross(bp, v)), vdot(bp, v))
    q_upper = qmul(qfrom_axis_angle(u, psi), q1)
    return qnormalize(qmul(qconj(base_rot), q_upper)), q_lower, v, hit, hrow


@njit(borrows=True, helper=True)
def _rest_twist(k, rest, dir_world, base_rot, joints, i, r, rot):  # type: ignore[no-untyped-def]
    """``twist="rest"`` for chain joint ``k``: its local rotation keeps its swing and takes its twist about
    the bone (``dir_world``, the world direction from the joint to the next named one) from ``rest``
    (:func:`~kinema._kernels.quat.qrest_twist`); the joint the bone points at does not move.  Written
    to ``r`` and ``rot[k]``; descendants are stale afterwards."""
    qw = (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])
    axis = vnormalized(qrotate(qconj(qw), dir_world))
    j = joints[k]
    ql = qrest_twist((r[i, j, 0], r[i, j, 1], r[i, j, 2], r[i, j, 3]), rest, axis)
    for c in range(4):
        r[i, j, c] = ql[c]
    qn = qmul(parent_world_rot(k, base_rot, rot), ql)
    for c in range(4):
        rot[k, c] = qn[c]


@njit(borrows=True, helper=True)
def _solve_item(i, chain, pose, item, params, flags, scratch, start):  # type: ignore[no-untyped-def]
    """Solve batch item ``i`` in place; returns ``(status, error, reached, bend_direction, limit_hit,
    history row)``.

    ``chain = (anc, joints, kl)`` (the plan's views), ``pose = (t, r, s)``, ``item = (tgt, pole, hint,
    erot, weight, soft, margin, hist)`` the item's inputs as tuples and floats (``hist``: the previous
    frame's history row, ``HIST_*``, read with ``SMOOTH`` and ``HAS_HINT``).  ``params``: the packed
    float options (``P_*``: the lower joint's hinge, read with ``HAS_HINGE``; the rest rotations, read
    with ``REST_TWIST``; the bend step, read with ``SMOOTH``; the twist spread), ``flags`` its option
    bits.  ``scratch = (pos, rot, scl, orig)``.

    ``start = (shared, base_pos, base_rot, base_scl, pos0, rot0, scl0)``: with ``shared`` every item
    starts from the same input pose, whose parent transform ``base_*`` and chain world transforms
    ``pos0, rot0, scl0`` the caller computed once; otherwise they are computed here.
    """
    anc, joints, kl = chain
    t, r, s = pose
    tgt, pole, hint, erot, weight, soft, margin, hist = item
    pos, rot, scl, orig = scratch
    shared, base_pos, base_rot, base_scl, pos0, rot0, scl0 = start
    spread = params[P_SPREAD]
    zero3 = (0.0, 0.0, 0.0)
    no_hist = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    nk = joints.shape[0]
    ke = nk - 1
    # Chain indices as int64 variables, not the literals 0 and 1: numba compiles a called kernel once
    # per literal value it is passed, so each literal would be another copy of the chain helpers.
    k_upper = np.int64(0)
    k_next = k_upper + 1
    st = _check_item(erot, flags)
    if st != OK:
        return st, math.nan, False, zero3, False, no_hist

    if weight < 1.0:
        for k in range(nk):
            j = joints[k]
            orig[k, 0] = r[i, j, 0]
            orig[k, 1] = r[i, j, 1]
            orig[k, 2] = r[i, j, 2]
            orig[k, 3] = r[i, j, 3]

    if shared:
        for k in range(nk):
            pos[k, 0] = pos0[k, 0]
            pos[k, 1] = pos0[k, 1]
            pos[k, 2] = pos0[k, 2]
            rot[k, 0] = rot0[k, 0]
            rot[k, 1] = rot0[k, 1]
            rot[k, 2] = rot0[k, 2]
            rot[k, 3] = rot0[k, 3]
            scl[k] = scl0[k]
    else:
        base_pos, base_rot, base_scl = path_world(anc, i, t, r, s)
        chain_world(k_upper, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
    pa = (pos[0, 0], pos[0, 1], pos[0, 2])
    pb = (pos[kl, 0], pos[kl, 1], pos[kl, 2])
    pc = (pos[ke, 0], pos[ke, 1], pos[ke, 2])
    st, a, b, lo, hi = _arm_lengths(pa, pb, pc, margin)
    if st != OK:
        return st, math.nan, False, zero3, False, no_hist
    bend_step = params[P_BEND_STEP]
    length = a + b
    hit = False
    if WITH_HINGE and flags & HAS_HINGE:
        # A hinge on the lower joint of a plain arm (upper, lower, end: checked by the caller).
        j0 = joints[0]
        j1 = joints[1]
        je = joints[2]
        it = i % t.shape[0]
        is_ = i % s.shape[0]
        q_up, q_low, v, hit, hrow = _hinge_arm(
            pa, (rot[0, 0], rot[0, 1], rot[0, 2], rot[0, 3]), scl[0], (t[it, j1, 0], t[it, j1, 1], t[it, j1, 2]),
            s[is_, j1, 0], (t[it, je, 0], t[it, je, 1], t[it, je, 2]), (r[i, j1, 0], r[i, j1, 1], r[i, j1, 2],
                                                                       r[i, j1, 3]),
            params, base_rot, lo, hi, tgt, pole, hint, flags, soft, pb, pc, a, b, hist, bend_step)
        for c in range(4):
            r[i, j0, c] = q_up[c]
            r[i, j1, c] = q_low[c]
        chain_world(k_upper, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
    else:
        v, elbow, end, hrow, ref = _arm_geometry(pa, pb, pc, a, b, lo, hi, tgt, pole, hint, flags, soft, hist,
                                                 bend_step)
        ab = (pos[kl, 0] - pa[0], pos[kl, 1] - pa[1], pos[kl, 2] - pa[2])

        # Upper bone: world correction, left-multiplied, through the parent inverse.
        to_elbow = (elbow[0] - pa[0], elbow[1] - pa[1], elbow[2] - pa[2])
        dq = _upper_turn(ab, (pc[0] - pb[0], pc[1] - pb[1], pc[2] - pb[2]), to_elbow, (hrow[0], hrow[1], hrow[2]), v,
                         ref)
        rotate_world(k_upper, dq, base_rot, joints, i, r, rot)
        if WITH_REST_TWIST and flags & REST_TWIST:
            rest = (params[P_REST_UPPER], params[P_REST_UPPER + 1], params[P_REST_UPPER + 2], params[P_REST_UPPER + 3])
            _rest_twist(k_upper, rest, to_elbow, base_rot, joints, i, r, rot)
        chain_world(k_next, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
        # Lower bone, from the refreshed positions.
        pb = (pos[kl, 0], pos[kl, 1], pos[kl, 2])
        pc = (pos[ke, 0], pos[ke, 1], pos[ke, 2])
        to_end = (end[0] - pb[0], end[1] - pb[1], end[2] - pb[2])
        dq = qfrom_two_vectors((pc[0] - pb[0], pc[1] - pb[1], pc[2] - pb[2]), to_end)
        rotate_world(kl, dq, base_rot, joints, i, r, rot)
        if WITH_REST_TWIST and flags & REST_TWIST:
            rest = (params[P_REST_LOWER], params[P_REST_LOWER + 1], params[P_REST_LOWER + 2], params[P_REST_LOWER + 3])
            _rest_twist(kl, rest, to_end, base_rot, joints, i, r, rot)
        chain_world(kl + 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)

    twisted = False
    if flags & HAS_END_ROTATION:
        q_end = qnormalize(erot)
        if spread > 0.0:
            # Forearm twist: the part of the end's world change that turns
            # about the lower-to-end axis; ``spread`` of it goes to the lower
            # joint and the twist joints after it, shared evenly.  Each turns
            # about the axis from itself to the end, so the end stays put.
            pc = (pos[ke, 0], pos[ke, 1], pos[ke, 2])
            fa = (pc[0] - pos[kl, 0], pc[1] - pos[kl, 1], pc[2] - pos[kl, 2])
            nfa = vnorm(fa)
            carried = (rot[ke, 0], rot[ke, 1], rot[ke, 2], rot[ke, 3])
            delta = qmul(q_end, qconj(carried))
            fa = (fa[0] / nfa, fa[1] / nfa, fa[2] / nfa)
            tw = qswing_twist(delta, fa)[1]
            share = spread * twist_angle(tw, fa) / (ke - kl)
            for k in range(kl, ke):
                axis = (pc[0] - pos[k, 0], pc[1] - pos[k, 1], pc[2] - pos[k, 2])
                # A twist joint sitting on the end has no axis to turn about: skip it.
                if vnorm(axis) > DEGENERATE_BONE_RTOL * length:
                    rotate_world(k, qfrom_axis_angle(axis, share), base_rot, joints, i, r, rot)
                    chain_world(k + 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
            twisted = True
        set_world_rot(ke, q_end, base_rot, joints, i, r, rot)

    if weight < 1.0:
        for k in range(nk):
            touched = k == 0 or k == kl or (k == ke and (flags & HAS_END_ROTATION) != 0) or (twisted and k > kl)
            if not touched:
                continue
            j = joints[k]
            q0 = (orig[k, 0], orig[k, 1], orig[k, 2], orig[k, 3])
            if weight <= 0.0:
                q = q0  # weight 0: the input rotation, bit for bit
            else:
                q = qslerp(qnormalize(q0), (r[i, j, 0], r[i, j, 1], r[i, j, 2], r[i, j, 3]), weight)
                if WITH_HINGE and flags & HAS_HINGE and k == kl:
                    # Part way from an input outside the hinge the blend leaves it: clamped again, as the
                    # other solvers' blends are (limits hold at every weight).
                    rest = (params[P_HINGE + 5], params[P_HINGE + 6], params[P_HINGE + 7], params[P_HINGE + 8])
                    q_rel, clamped = apply_limit(LIMIT_HINGE, params[P_HINGE:P_HINGE + 5], qmul(qconj(rest), q))
                    if clamped:
                        q = qmul(rest, q_rel)
                        hit = True
            r[i, j, 0] = q[0]
            r[i, j, 1] = q[1]
            r[i, j, 2] = q[2]
            r[i, j, 3] = q[3]
        chain_world(k_upper, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)

    err = vmagnitude(pos[ke, 0] - tgt[0], pos[ke, 1] - tgt[1], pos[ke, 2] - tgt[2])  # (the true distance in any units)
    return OK, err, err <= REACH_RTOL * length, v, hit, hrow


@njit(helper=True)
def _solve_range(lo, hi, args):  # type: ignore[no-untyped-def]
    """Solve items ``lo .. hi-1`` with one scratch set.

    ``args = (plan, params, t, r, s, *inputs, *outputs)`` (flat: see :mod:`.drivers`):

    * ``plan = [kl, n_anc, anc..., joints...]`` (the chain: the upper joint's ancestors root first, then
      upper ... lower ... end, ``joints[kl]`` the lower one);
    * ``params (P_SIZE,)`` the packed float options (``P_*``, with the option bits ``flags`` and
      ``shared``: all items start from the same pose, the input pose had no batch dims, so its world
      transforms are computed once per chunk);
    * the pose arrays ``t, r, s``;
    * ``inputs = target, pole, hint, erot, hist, weight, soft, margin``: ``(1|N, 3)`` each for the
      first three, ``erot (1|N, 4)``, ``hist (1|N, HIST_SIZE)``, ``(1|N,)`` each for the last three
      (margin < 0: the default);
    * ``outputs = err, reached, bend, status, hits, hist_out``: ``err, reached (N,)``, ``bend (N, 3)``,
      ``status (N,)`` (per item: 0, why it could not be solved, or ``NONFINITE_RESULT`` when what it wrote
      overflowed), ``hits (N,)``, and with ``SMOOTH``
      ``hist_out (N, HIST_SIZE)``, each item's history row for its next frame.
    """
    plan, params, t, r, s, target, pole, hint, erot, hist, weight, soft, margin = args[:13]
    err, reached, bend, status, hits, hist_out = args[13:]
    pose = (t, r, s)
    flags = int(params[P_FLAGS])
    shared = params[P_SHARED] != 0.0
    kl = plan[0]
    anc = plan[2:2 + plan[1]]
    joints = plan[2 + plan[1]:]
    nk = joints.shape[0]
    pos = np.empty((nk, 3))
    rot = np.empty((nk, 4))
    scl = np.empty(nk)
    orig = np.empty((nk, 4))
    pos0 = np.empty((nk, 3))
    rot0 = np.empty((nk, 4))
    scl0 = np.empty(nk)
    base_pos = (0.0, 0.0, 0.0)
    base_rot = (0.0, 0.0, 0.0, 1.0)
    base_scl = 1.0
    if shared and hi > lo:
        # Every item starts from the same pose: find its world transforms once
        # per chunk (the same operations each item would run, so the same numbers).
        base_pos, base_rot, base_scl = path_world(anc, lo, t, r, s)
        chain_world(np.int64(0), base_pos, base_rot, base_scl, joints, lo, t, r, s, pos0, rot0, scl0)
    chain = (anc, joints, kl)
    scratch = (pos, rot, scl, orig)
    start = (shared, base_pos, base_rot, base_scl, pos0, rot0, scl0)
    ntg = target.shape[0]
    npo = pole.shape[0]
    nh = hint.shape[0]
    ne = erot.shape[0]
    nhs = hist.shape[0]
    nw = weight.shape[0]
    nso = soft.shape[0]
    nm = margin.shape[0]
    for i in range(lo, hi):
        # Per-item inputs have 1 or N rows (row i, or row 0 for all).
        it = i if ntg > 1 else 0
        ip = i if npo > 1 else 0
        ih = i if nh > 1 else 0
        ie = i if ne > 1 else 0
        ihs = i if nhs > 1 else 0
        item = ((target[it, 0], target[it, 1], target[it, 2]),
                (pole[ip, 0], pole[ip, 1], pole[ip, 2]),
                (hint[ih, 0], hint[ih, 1], hint[ih, 2]),
                (erot[ie, 0], erot[ie, 1], erot[ie, 2], erot[ie, 3]),
                weight[i if nw > 1 else 0], soft[i if nso > 1 else 0], margin[i if nm > 1 else 0],
                (hist[ihs, 0], hist[ihs, 1], hist[ihs, 2], hist[ihs, 3], hist[ihs, 4], hist[ihs, 5],
                 hist[ihs, 6], hist[ihs, 7]))
        res = _solve_item(i, chain, pose, item, params, flags, scratch, start)
        hits[i] = 1 if res[4] else 0
        # The output check, per item (here, on the item's own thread): the item wrote its chain's rotations
        # and its error, nothing else.  Finite inputs of absurd size can overflow them.
        status[i] = NONFINITE_RESULT if res[0] == OK and not item_finite(r, i, joints, res[1]) else res[0]
        err[i] = res[1]
        reached[i] = res[2]
        bend[i, 0] = res[3][0]
        bend[i, 1] = res[3][1]
        bend[i, 2] = res[3][2]
        if WITH_SMOOTH and flags & SMOOTH:
            for c in range(HIST_SIZE):
                hist_out[i, c] = res[5][c]


@njit(borrows=True, helper=True)
def _input_status(args):  # type: ignore[no-untyped-def]
    """The drivers' check of every input before anything is solved (codes in :mod:`.constants`)."""
    plan, params, t, r, s, target, pole, hint, erot, hist, weight, soft, margin = args[:13]
    # Shared: every row of the pose arrays is a copy of the first (kinema._solve.prepare broadcast one input
    # pose), so the first is the input.
    rows = 1 if params[P_SHARED] != 0.0 else r.shape[0]
    status = input_status(t[:rows], r[:rows], s[:rows], target, pole, plan[2:])
    if status != OK:
        return status
    if not (all_finite(hint) and all_finite(erot) and all_finite(hist) and all_finite(weight) and all_finite(soft)
            and all_finite(margin)):
        return NONFINITE_INPUT
    return OK


@njit(borrows=True, helper=True)
def _result_status(args):  # type: ignore[no-untyped-def]
    """The drivers' output check once every item was solved: each item checked its own output
    (:func:`~kinema._kernels.chain.item_finite`); the first item that could not be solved tells,
    :data:`~kinema._kernels.constants.NONFINITE_RESULT` when it overflowed (raised for the whole call),
    else OK (the caller raises that item's own status)."""
    status = args[16]
    for i in range(status.shape[0]):
        if status[i] != OK:
            return NONFINITE_RESULT if status[i] == NONFINITE_RESULT else OK
    return OK


#: ``solve_serial(n, args)`` and ``solve_parallel(n_chunks, n, args)`` (:mod:`.drivers`, ``args`` as
#: :func:`_solve_range` reads them): the input status (0 = ok), else the output check's.
DRIVERS = make_drivers("two_bone", _input_status, _solve_range, _result_status)
solve_serial, solve_parallel = DRIVERS

#: The same drivers compiled without the code of the ``FULL_ONLY`` options (hinge limits, bend hints,
#: smooth history, ``twist="rest"``): copies of the per-item functions with those switches off.
DRIVERS_BASIC = make_drivers(
    "two_bone_basic", _input_status,
    specialise(globals(), ("_solve_range", "_solve_item", "_arm_geometry"),
               {"WITH_HINGE": False, "WITH_HINT": False, "WITH_SMOOTH": False, "WITH_REST_TWIST": False},
               "basic")["_solve_range"],
    _result_status)


def drivers_for(flags: int) -> Drivers:
    """The drivers for a call with the option bits ``flags``: DRIVERS_BASIC unless a ``FULL_ONLY`` bit is set
    (the same numbers either way: the same code, less of it compiled)."""
    return DRIVERS if flags & FULL_ONLY else DRIVERS_BASIC


# ------------------------------------------------------------------------ 2D
@njit(helper=True)
def _solve_2d_item(rx, ry, tx, ty, l1, l2, bend, margin, soft):  # type: ignore[no-untyped-def]
    """``(status, elbow_x, elbow_y, end_x, end_y, angle1, angle2, error)`` for one 2D arm.

    The arm is solved relative to the root in units of ``2**e``, ``e`` the binary exponent of the longer bone
    (an exact scaling: the same numbers as unscaled wherever those neither overflow nor underflow), so
    lengths near 1e155 and beyond, whose squares overflow, and near 1e-155, whose squares underflow, solve
    as an arm of length 1 does; a distance whose square still overflows (a target 1e154 arm lengths away)
    is taken by :func:`~.quat.hypot`.  ``NONFINITE_RESULT`` when a result is not a float64 (beyond 1.8e308)."""
    nan = math.nan
    if not (math.isfinite(rx) and math.isfinite(ry) and math.isfinite(tx) and math.isfinite(ty)):
        return NONFINITE_INPUT, nan, nan, nan, nan, nan, nan, nan
    if not (math.isfinite(l1) and math.isfinite(l2) and l1 > 0.0 and l2 > 0.0):
        return ZERO_BONE, nan, nan, nan, nan, nan, nan, nan
    e = math.frexp(max(l1, l2))[1]
    a = math.ldexp(l1, -e)  # the longer bone in [0.5, 1)
    b = math.ldexp(l2, -e)
    length = a + b
    if not (a > DEGENERATE_BONE_RTOL * length and b > DEGENERATE_BONE_RTOL * length):
        return ZERO_BONE, nan, nan, nan, nan, nan, nan, nan
    m = margin
    if m < 0.0:
        m = DEFAULT_MARGIN_FRACTION * min(a, b)
    else:
        m = math.ldexp(m, -e)
    if m > min(a, b):
        return MARGIN_TOO_LARGE, nan, nan, nan, nan, nan, nan, nan
    ox = tx - rx  # the target's offset from the root
    oy = ty - ry
    if not (math.isfinite(ox) and math.isfinite(oy)):  # beyond 1.8e308: taken in the arm's units
        ox = math.ldexp(tx, -e) - math.ldexp(rx, -e)
        oy = math.ldexp(ty, -e) - math.ldexp(ry, -e)
        if not (math.isfinite(ox) and math.isfinite(oy)):
            return NONFINITE_RESULT, nan, nan, nan, nan, nan, nan, nan  # no float64 distance to the target
        dx = ox
        dy = oy
    else:
        dx = math.ldexp(ox, -e)
        dy = math.ldexp(oy, -e)
    if math.isfinite(dx) and math.isfinite(dy):
        d2 = dx * dx + dy * dy
        d = math.sqrt(d2) if d2 < math.inf else hypot(dx, dy)
    else:
        d = math.inf  # more than 2**1024 arm lengths away: out of reach (the direction is the offset's)
    # Target on the root: no direction; reach along +x (angle 0).
    base = math.atan2(oy, ox) if d > TARGET_ON_SHOULDER_RTOL * length else 0.0
    dc = reach_distance(d, abs(a - b) + m, length - m, soft)
    # dc == 0 only for margin=0 and l1 == l2: fully folded, elbow at 90 degrees to the base.
    along = (a * a + dc * dc - b * b) / (2.0 * dc) if dc > 0.0 else 0.0
    rise = math.sqrt(max(0.0, a * a - along * along))
    sgn = 1.0 if bend >= 0.0 else -1.0
    a1 = base + sgn * math.atan2(rise, along)
    a2 = base - sgn * math.atan2(rise, dc - along)
    ex = rx + math.ldexp(a * math.cos(a1), e)
    ey = ry + math.ldexp(a * math.sin(a1), e)
    cx = ex + math.ldexp(b * math.cos(a2), e)
    cy = ey + math.ldexp(b * math.sin(a2), e)
    ux = cx - tx
    uy = cy - ty
    u2 = ux * ux + uy * uy
    err = math.sqrt(u2) if 1e-290 < u2 < math.inf else hypot(ux, uy)
    if not (math.isfinite(ex) and math.isfinite(ey) and math.isfinite(cx) and math.isfinite(cy)
            and math.isfinite(err)):
        return NONFINITE_RESULT, nan, nan, nan, nan, nan, nan, nan
    return OK, ex, ey, cx, cy, a1, a2, err


@njit(helper=True)
def _solve_2d_range(lo, hi, args):  # type: ignore[no-untyped-def]
    """2D arms ``lo .. hi-1``: ``args = (root, target, l1, l2, bend, margin, soft, elbow, end, angles, err,
    status)``, inputs with 1 or ``N`` rows; outputs ``elbow, end (N,2)``, ``angles (N,2)``, ``err, status (N,)``."""
    root, target, l1, l2, bend, margin, soft, elbow, end, angles, err, status = args
    nr = root.shape[0]
    nt = target.shape[0]
    n1 = l1.shape[0]
    n2 = l2.shape[0]
    nb = bend.shape[0]
    nm = margin.shape[0]
    ns = soft.shape[0]
    for i in range(lo, hi):
        ir = i % nr
        it = i % nt
        res = _solve_2d_item(root[ir, 0], root[ir, 1], target[it, 0], target[it, 1], l1[i % n1], l2[i % n2],
                             bend[i % nb], margin[i % nm], soft[i % ns])
        status[i] = res[0]
        elbow[i, 0] = res[1]
        elbow[i, 1] = res[2]
        end[i, 0] = res[3]
        end[i, 1] = res[4]
        angles[i, 0] = res[5]
        angles[i, 1] = res[6]
        err[i] = res[7]


@njit(borrows=True, helper=True)
def _ok_2d(args):  # type: ignore[no-untyped-def]
    """The 2D drivers' checks: OK (each item reports its own status)."""
    return OK


#: The 2D arm's drivers (:mod:`.drivers`): ``serial(n, args)``, ``parallel(n_chunks, n, args)``, ``args`` as
#: :func:`_solve_2d_range` reads them.
DRIVERS_2D = make_drivers("two_bone_2d", _ok_2d, _solve_2d_range, _ok_2d)
