"""Temporal helpers for IK targets and poses, frame-rate independent.

* :class:`CriticallyDampedSpring`: a target follower without overshoot
  (``x'' + 2 omega x' + omega^2 x = omega^2 y``);
* :class:`OneEuroFilter`: the one-euro filter (Casiez et al., CHI 2012), a
  low-pass filter whose cutoff rises with speed (little lag when moving,
  little jitter when still);
* :func:`limit_angular_speed` and :class:`AngularSpeedLimiter`: at most
  ``max_speed`` radians per second of turn per joint between frames.

Each takes the frame's ``dt`` (seconds) and is integrated exactly over it,
with the input moving linearly from the previous sample to the new one, so
the same motion sampled at 30 or 120 Hz gives the same output at the
shared instants (up to the difference between the two piecewise-linear
inputs), unlike a per-frame ``lerp(x, y, k)``.

Values are arrays of any shape ``(...)`` (a point ``(3,)``, a batch of
targets ``(n, 3)``); a filter's shape is fixed by its first value.  A step
of any ``dt`` (0, 1e-300 s: two samples at one instant, or hours) is exact
without dividing the input's change by ``dt``; an update whose result would
overflow float64 raises :class:`~kinema.SolverInputError` and keeps the state.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import rotation as rot
from ._types import FloatArray
from ._validate import positive_number, unit_and_length
from .errors import ShapeError, SolverInputError
from .goals import as_input_array, unit_quaternions

__all__ = ["CriticallyDampedSpring", "OneEuroFilter", "AngularSpeedLimiter", "limit_angular_speed"]


def _value(x: Any, what: str, shape: tuple[int, ...] | None) -> FloatArray:
    a = as_input_array(x, what, ())
    if shape is not None and a.shape != shape:
        raise ShapeError(what, str(shape), tuple(a.shape))
    return np.array(a, dtype=np.float64)  # own copy


def _lag_share(r: ArrayLike) -> FloatArray:
    """``(1 - exp(-r)) / r`` for ``r = dt / tau >= 0`` (1 at ``r = 0``), without cancellation for small ``r``.

    The mean of ``exp(-t / tau)`` over a step: how the first-order and spring responses to an input moving
    linearly over the step are written without dividing the input's change by ``dt`` (which loses every
    digit, or overflows, for a tiny ``dt``).
    """
    r = np.asarray(r, dtype=np.float64)
    pos = r > 0.0
    return np.where(pos, -np.expm1(-r) / np.where(pos, r, 1.0), 1.0)


def _commit(state: dict[str, FloatArray], what: str) -> None:
    """:class:`~kinema.SolverInputError` when the new ``state`` is not finite (it is then not kept)."""
    for name, a in state.items():
        if not np.all(np.isfinite(a)):
            raise SolverInputError(f"{what}: the update overflowed float64 in its {name} (values near 1e308): "
                                   "the state is left as it was")


def _speed(d: FloatArray) -> FloatArray:
    """Norm over the last axis (kept), or ``|d|`` for a scalar state."""
    return unit_and_length(d)[1] if d.ndim else np.abs(d)


class CriticallyDampedSpring:
    """Follow a target with a critically damped spring of angular frequency ``omega`` (rad/s).

    ``x'' + 2 omega x' + omega^2 x = omega^2 y``: no overshoot; a step in
    the target is followed with ``(1 + omega t) exp(-omega t)`` of it left
    after ``t`` seconds.  Each :meth:`update` integrates exactly over
    ``dt`` with the target moving linearly from the previous one (a
    target moving at constant speed is followed with a constant lag of
    ``2 / omega`` seconds).  The first update (or :meth:`reset`) sets the
    state without motion.
    """

    def __init__(self, omega: float) -> None:
        self.omega = positive_number(omega, "omega")
        self.value: FloatArray | None = None
        self.velocity: FloatArray | None = None
        self._target: FloatArray | None = None

    def reset(self, value: ArrayLike, velocity: ArrayLike | None = None) -> None:
        """Set the state: at ``value`` (also the last target), moving at ``velocity`` (default 0)."""
        v = _value(value, "value", None)
        self._start(v, None if velocity is None else _value(velocity, "velocity", v.shape))

    def _start(self, v: FloatArray, velocity: FloatArray | None) -> None:
        """Set the state from checked arrays (:meth:`reset`, and the first :meth:`update` with its ``target``)."""
        self.value = v
        self._target = v.copy()
        self.velocity = np.zeros_like(v) if velocity is None else velocity

    def update(self, target: ArrayLike, dt: float) -> FloatArray:
        """Advance by ``dt`` seconds towards ``target`` (same shape as the state); returns the new value.

        ``dt = 0`` (two samples at one instant) is the limit of a tiny step: the value and velocity stay as
        they are and ``target`` becomes the latest target, the one the next step starts from.
        """
        if self.value is None or self.velocity is None or self._target is None:
            positive_number(dt, "dt", allow_zero=True)  # checked on every call, the first too
            self._start(_value(target, "target", None), None)  # (an error names ``target``, not reset's ``value``)
            assert self.value is not None
            return self.value.copy()
        y1 = _value(target, "target", self.value.shape)
        h = positive_number(dt, "dt", allow_zero=True)
        if h == 0.0:
            # No time to move (the step's formula at h = 0 gives x0 and v0, to rounding), but the sample is
            # recorded: returning before it made the next step ramp from the older target.
            self._target = y1
            return self.value.copy()
        w = self.omega
        y0 = self._target
        x0, v0 = self.value, self.velocity
        # x = y0 + c t - 2c/w + (a + b t) exp(-w t), c = (y1 - y0) / h the target's speed over the step: the
        # ramp's particular solution plus the free motion.  At t = h, written with z = w h and the change
        # y1 - y0 itself (never c, which loses every digit or overflows for a tiny h):
        z = w * h
        e = math.exp(-z)
        ez = z * e if e > 0.0 else 0.0  # z exp(-z), 0 (not inf * 0) when w h overflows
        share = float(_lag_share(z))
        with np.errstate(over="ignore", invalid="ignore"):
            change = y1 - y0
            d0 = x0 - y0
            value = y0 + (1.0 + e - 2.0 * share) * change + (e + ez) * d0 + (e * h) * v0
            velocity = (w * (share - e)) * change + (e - ez) * v0 - (w * ez) * d0
        _commit({"value": value, "velocity": velocity}, "CriticallyDampedSpring")
        self.value, self.velocity, self._target = value, velocity, y1
        return self.value.copy()


class OneEuroFilter:
    """The one-euro filter: low-pass with a cutoff that grows with speed.

    * ``min_cutoff`` (Hz): the cutoff at rest (lower: smoother, more lag);
    * ``beta`` (1/length units): how fast the cutoff grows with speed,
      ``cutoff = min_cutoff + beta * |speed|`` (``|speed|`` the norm of the
      filtered derivative over the last axis, so a point is filtered as a
      whole);
    * ``d_cutoff`` (Hz): the cutoff of the derivative's own filter.

    Each first-order stage is integrated exactly over ``dt`` (time constant
    ``1 / (2 pi cutoff)``): the value's with the input moving linearly over
    the step, the derivative's with the step's constant slope; the cutoff
    over a step comes from the mean of the speeds at its two ends.
    """

    def __init__(self, min_cutoff: float = 1.0, beta: float = 0.0, d_cutoff: float = 1.0) -> None:
        self.min_cutoff = positive_number(min_cutoff, "min_cutoff")
        self.beta = positive_number(beta, "beta", allow_zero=True)
        self.d_cutoff = positive_number(d_cutoff, "d_cutoff")
        self.value: FloatArray | None = None
        self.derivative: FloatArray | None = None
        self._input: FloatArray | None = None

    def reset(self, value: ArrayLike) -> None:
        """Set the state at ``value`` (also the last input), at rest."""
        self._start(_value(value, "value", None))

    def _start(self, v: FloatArray) -> None:
        """Set the state from a checked array (:meth:`reset`, and the first :meth:`update` with its ``x``)."""
        self.value = v
        self._input = v.copy()
        self.derivative = np.zeros_like(v)

    def update(self, x: ArrayLike, dt: float) -> FloatArray:
        """Filter the new sample ``x`` taken ``dt`` seconds after the previous one; returns the filtered value.

        ``dt = 0`` (two samples at one instant) is the limit of a tiny step: the value stays as it is, ``x``
        becomes the latest input (the one the next step starts from) and the derivative takes the jump's
        impulse, ``(x - previous input) / tau_d``.
        """
        if self.value is None or self.derivative is None or self._input is None:
            positive_number(dt, "dt", allow_zero=True)  # checked on every call, the first too
            self._start(_value(x, "x", None))  # (an error names ``x``, not reset's ``value``)
            assert self.value is not None
            return self.value.copy()
        y1 = _value(x, "x", self.value.shape)
        h = positive_number(dt, "dt", allow_zero=True)
        y0 = self._input
        tau_d = 1.0 / (2.0 * math.pi * self.d_cutoff)
        d0 = self.derivative
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            change = y1 - y0
            # the derivative: d' = (c - d) / tau_d with c = change / h over the step
            d1 = change * (float(_lag_share(h / tau_d)) / tau_d) + d0 * math.exp(-h / tau_d)
            # the cutoff over the step from the mean speed at its two ends (second-order accurate in dt)
            speed = 0.5 * (_speed(d0) + _speed(d1))
            tau = 1.0 / (2.0 * math.pi * (self.min_cutoff + self.beta * speed))
            # value: x' = (y - x) / tau with y = y0 + change t / h over the step
            value = y0 + change * (1.0 - _lag_share(h / tau)) + (self.value - y0) * np.exp(-h / tau)
        if h == 0.0:
            # No time to move: the value exactly (the formula gives it to rounding); the input and the
            # derivative above are still updated, as a tiny dt would (returning before them made the next
            # step start from the older sample).
            value = self.value.copy()
        _commit({"value": value, "derivative": d1}, "OneEuroFilter")
        self.value, self.derivative, self._input = value, d1, y1
        return self.value.copy()


def limit_angular_speed(previous: ArrayLike, rotations: ArrayLike, max_speed: ArrayLike, dt: float) -> FloatArray:
    """``rotations (..., J, 4)`` turned back towards ``previous (..., J, 4)`` so no joint turns faster than
    ``max_speed`` (rad/s, a number or ``(J,)`` per joint) over ``dt`` seconds.

    A joint that turns by ``angle > max_speed * dt`` is slerped from
    ``previous`` by ``max_speed * dt / angle``: it moves at the limit along
    the shortest arc.  Joints within the limit come back unchanged (bit for
    bit).  Quaternions are xyzw (normalised here).
    """
    prev = unit_quaternions(as_input_array(previous, "previous", (4,)), "previous")
    cur = unit_quaternions(as_input_array(rotations, "rotations", (4,)), "rotations")
    try:
        np.broadcast_shapes(prev.shape, cur.shape)
    except ValueError:
        raise ShapeError("rotations", f"broadcastable with previous {prev.shape}", tuple(cur.shape)) from None
    speed = as_input_array(max_speed, "max_speed", ())
    if np.any(speed < 0.0):
        raise SolverInputError("max_speed must be >= 0")
    h = positive_number(dt, "dt", allow_zero=True)
    with np.errstate(over="ignore"):
        step = speed * h  # inf where speed * dt overflows: no limit
    if step.ndim and (cur.ndim < 2 or step.shape != cur.shape[-2:-1]):
        raise ShapeError("max_speed", f"a number or ({cur.shape[-2] if cur.ndim >= 2 else 'J'},) per joint",
                         tuple(step.shape))
    prev, cur = np.broadcast_arrays(prev, cur)
    angle = rot.angle_between(prev, cur)
    over = angle > step
    out = np.array(cur, dtype=np.float64)
    if np.any(over):
        frac = np.broadcast_to(step, angle.shape)[over] / angle[over]
        out[over] = rot.slerp(prev[over], cur[over], frac)
    return out


class AngularSpeedLimiter:
    """:func:`limit_angular_speed` between successive frames: keeps the last output pose's rotations.

    The shape of the rotations is fixed by the first frame (or :meth:`reset`).
    """

    def __init__(self, max_speed: ArrayLike) -> None:
        speed = as_input_array(max_speed, "max_speed", ())
        if np.any(speed < 0.0):
            raise SolverInputError("max_speed must be >= 0")
        self.max_speed = np.array(speed)
        self.previous: FloatArray | None = None

    def reset(self, rotations: ArrayLike | None = None) -> None:
        """Forget the last frame (the next update passes through), or start from ``rotations``."""
        self.previous = None if rotations is None else unit_quaternions(
            np.array(as_input_array(rotations, "rotations", (4,))), "rotations")

    def update(self, rotations: ArrayLike, dt: float) -> FloatArray:
        """This frame's ``rotations (..., J, 4)`` limited against the last output; returns them.

        The state is the last *output*, so ``dt = 0`` allows no turn: the last output comes back (as it would,
        to rounding, for a tiny ``dt``) and stays the state.
        """
        if self.previous is None:
            positive_number(dt, "dt", allow_zero=True)  # checked on every call, the first too
            self.reset(rotations)
            assert self.previous is not None
            return self.previous.copy()
        cur = as_input_array(rotations, "rotations", (4,))
        if cur.shape != self.previous.shape:
            raise ShapeError("rotations", f"{self.previous.shape} as the previous frame (reset() to change it)",
                             tuple(cur.shape))
        out = limit_angular_speed(self.previous, cur, self.max_speed, dt)
        self.previous = out
        return out.copy()
