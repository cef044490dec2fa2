"""Temporal helpers: frame-rate independence, exact responses, speed limits, bad inputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kinema import rotation as rot
from kinema.errors import KinemaError, ShapeError, SolverInputError
from kinema.filters import AngularSpeedLimiter, CriticallyDampedSpring, OneEuroFilter, limit_angular_speed


def motion(t: float) -> np.ndarray:
    """A smooth target path (metres): a slow figure in 3-D plus a drift."""
    return np.array([0.3 * math.sin(math.pi * t), 0.2 * math.cos(0.7 * math.pi * t) + 0.1 * t,
                     0.25 * math.sin(0.4 * math.pi * t + 0.3)])


def run(filt: Any, rate: float, seconds: float, path: Callable[[float], np.ndarray]) -> np.ndarray:
    dt = 1.0 / rate
    n = int(round(seconds * rate))
    return np.array([filt.update(path(k * dt), dt) for k in range(n + 1)])


@pytest.mark.parametrize("make", [lambda: CriticallyDampedSpring(8.0), lambda: OneEuroFilter(1.0, 0.0, 1.0),
                                  lambda: OneEuroFilter(0.5, 2.0, 1.0)], ids=["spring", "one-euro", "one-euro-beta"])
def test_same_motion_at_30_and_120_hz(make: Callable[[], Any]) -> None:
    slow = run(make(), 30.0, 4.0, motion)
    fast = run(make(), 120.0, 4.0, motion)
    assert np.max(np.abs(slow - fast[::4])) <= 1e-3
    # a per-frame lerp with a fixed factor, the thing these replace, is not frame-rate independent
    def lerp_run(rate: float) -> np.ndarray:
        x = motion(0.0)
        out = [x]
        for k in range(1, int(4.0 * rate) + 1):
            x = x + 0.2 * (motion(k / rate) - x)
            out.append(x)
        return np.array(out)
    assert np.max(np.abs(lerp_run(30.0) - lerp_run(120.0)[::4])) > 1e-2


def test_spring_step_response_is_exact() -> None:
    omega = 5.0
    spring = CriticallyDampedSpring(omega)
    spring.reset(np.zeros(2))
    for rate in (30.0, 120.0):
        spring.reset(np.zeros(2))
        spring._target = np.ones(2)  # a step at t = 0: the target is 1 from the start of the first frame
        dt = 1.0 / rate
        for k in range(1, int(rate) + 1):
            x = spring.update(np.ones(2), dt)
            t = k * dt
            np.testing.assert_allclose(x, 1.0 - (1.0 + omega * t) * math.exp(-omega * t), rtol=0, atol=1e-12)
    # a ramp is followed with a constant lag of 2 / omega seconds, any frame rate
    spring = CriticallyDampedSpring(omega)
    spring.reset([0.0], velocity=[1.0])
    spring.value = np.array([-2.0 / omega])
    for k in range(1, 50):
        x = spring.update([k / 10.0], 0.1)
        assert x[0] == pytest.approx(k / 10.0 - 2.0 / omega, abs=1e-12)


def test_one_euro_smooths_jitter_and_follows_fast_motion() -> None:
    rng = np.random.default_rng(1)
    still = OneEuroFilter(min_cutoff=1.0, beta=0.0)
    noisy = 0.01 * rng.normal(size=(300, 3))
    out = np.array([still.update(x, 1 / 60) for x in noisy])
    assert out[60:].std() < 0.3 * noisy[60:].std()
    # with beta the cutoff rises with speed: less lag on a fast ramp than without
    lag = {}
    for beta in (0.0, 5.0):
        f = OneEuroFilter(min_cutoff=1.0, beta=beta)
        for k in range(121):
            y = f.update([2.0 * k / 60, 0.0, 0.0], 1 / 60)
        lag[beta] = 2.0 * 120 / 60 - y[0]
    assert lag[5.0] < 0.5 * lag[0.0]


def test_first_update_and_zero_dt_pass_the_state() -> None:
    for f in (CriticallyDampedSpring(3.0), OneEuroFilter()):
        np.testing.assert_array_equal(f.update([1.0, 2.0, 3.0], 0.1), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(f.update([5.0, 2.0, 3.0], 0.0), [1.0, 2.0, 3.0])
        with pytest.raises(ShapeError):
            f.update([1.0, 2.0], 0.1)
        with pytest.raises(SolverInputError):
            f.update([np.nan, 2.0, 3.0], 0.1)
        with pytest.raises(SolverInputError):
            f.update([1.0, 2.0, 3.0], -0.1)
        with pytest.raises(ShapeError):
            f.update(np.array([1 + 1j, 2, 3]), 0.1)


def test_angular_speed_limit_is_rate_independent() -> None:
    start = rot.from_rotvec(np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]]))
    goal = rot.from_rotvec(np.array([[0.0, 2.0, 0.0], [0.1, 0.0, 1.5]]))
    speed = np.array([1.0, 3.0])  # rad/s per joint
    outs = {}
    for rate in (30.0, 120.0):
        lim = AngularSpeedLimiter(speed)
        lim.reset(start)
        frames = [lim.update(goal, 1.0 / rate) for _ in range(int(rate))]
        outs[rate] = np.array(frames)
        steps = rot.angle_between(np.concatenate([start[None], outs[rate][:-1]]), outs[rate])
        assert np.all(steps <= speed * (1.0 / rate) + 1e-12)
    np.testing.assert_allclose(outs[30.0], outs[120.0][3::4], rtol=0, atol=1e-9)
    # after one second: joint 0 has turned 1 rad towards its goal, joint 1 reached its goal
    np.testing.assert_allclose(rot.angle_between(start[0], outs[30.0][-1, 0]), 1.0, atol=1e-9)
    np.testing.assert_allclose(rot.angle_between(goal[1], outs[30.0][-1, 1]), 0.0, atol=1e-9)


def test_angular_speed_limit_leaves_slow_joints_alone() -> None:
    prev = rot.from_rotvec(np.array([[0.0, 0.1, 0.0], [0.2, 0.0, 0.0]]))
    cur = rot.from_rotvec(np.array([[0.0, 0.11, 0.0], [0.2, 0.0, 0.5]]))
    out = limit_angular_speed(prev, cur, 2.0, 1 / 30)
    np.testing.assert_array_equal(out[0], cur[0])  # 0.01 rad < 2/30: unchanged bit for bit
    assert rot.angle_between(prev[1], out[1]) == pytest.approx(2.0 / 30, abs=1e-12)
    with pytest.raises(ShapeError):
        limit_angular_speed(prev, cur, [1.0, 2.0, 3.0], 0.1)
    with pytest.raises(SolverInputError):
        limit_angular_speed(prev, cur, -1.0, 0.1)
    with pytest.raises(KinemaError):
        limit_angular_speed(prev, np.zeros((2, 4)), 1.0, 0.1)
    with pytest.raises(KinemaError):
        limit_angular_speed(prev, cur, 1.0, "x")  # type: ignore[arg-type]


def test_bad_filter_parameters() -> None:
    for bad in (0.0, -1.0, math.inf, "a", None, True):
        with pytest.raises(SolverInputError):
            CriticallyDampedSpring(bad)  # type: ignore[arg-type]
        with pytest.raises(SolverInputError):
            OneEuroFilter(min_cutoff=bad)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError):
        OneEuroFilter(beta=-1.0)


@pytest.mark.parametrize("make", [lambda: CriticallyDampedSpring(10.0), lambda: OneEuroFilter(1.0, 0.5, 1.0)],
                         ids=["spring", "one-euro"])
@pytest.mark.parametrize("dt", [1e-12, 1e-20, 1e-300, 5e-324])
def test_a_new_sample_an_instant_later_moves_nothing(make: Callable[[], Any], dt: float) -> None:
    """Two samples at (almost) the same instant (an input device firing twice): over ``dt <= 1e-12`` s a filter
    whose time constants are over 0.01 s moves by at most ``dt / 0.01`` of the few metres between its state and
    the samples, plus rounding (1000 m: 1e-13 m): under a nanometre, however far the new sample is.  The state
    stays finite and later frames follow as usual."""
    for jump in (0.3, 0.123456789, -0.7, 2.5):
        filt = make()
        for k in range(31):
            filt.update([1000.0 + 0.01 * k, -3.0, 0.5], 1 / 60)
        before = filt.value.copy()
        sample = np.array([1000.3 + jump, -3.0 + jump, 0.5 - jump])  # dt seconds after the last one
        after = filt.update(sample, dt)
        assert np.max(np.abs(after - before)) <= 1e-9, jump
        later = np.array([filt.update(sample, 1 / 60) for _ in range(240)])
        assert np.all(np.isfinite(later))
        np.testing.assert_allclose(later[-1], sample, rtol=0, atol=1e-3)  # four seconds on: settled on it


@pytest.mark.parametrize("make", [lambda: CriticallyDampedSpring(10.0), lambda: OneEuroFilter(1.0, 0.5, 1.0)],
                         ids=["spring", "one-euro"])
def test_an_update_that_overflows_is_refused_and_keeps_the_state(make: Callable[[], Any]) -> None:
    filt = make()
    filt.update([1e308], 0.1)
    with pytest.raises(SolverInputError, match="overflowed"):
        filt.update([-1e308], 0.1)  # a change of 2e308: beyond float64
    np.testing.assert_array_equal(filt.value, [1e308])
    out = filt.update([1e308], 0.1)
    np.testing.assert_array_equal(out, [1e308])


def test_angular_speed_limiter_keeps_the_first_frames_shape() -> None:
    lim = AngularSpeedLimiter(1.0)
    lim.update(rot.identity((2,)), 0.1)
    with pytest.raises(ShapeError, match=r"expected shape \(2, 4\)"):
        lim.update(rot.identity((3, 2)), 0.1)  # would have broadcast to 3 x 2 joints
    with pytest.raises(ShapeError, match=r"got \(4,\)"):
        lim.update(rot.identity(), 0.1)


def test_angular_speed_limit_reads_quaternions_of_any_finite_size() -> None:
    """A quaternion with huge components is the rotation it points to (its norm overflows a plain sum of
    squares): the same output as the unit quaternion, a unit quaternion."""
    unit = limit_angular_speed([0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0], 1.0, 0.1)
    huge = limit_angular_speed([0.0, 0.0, 0.0, 1e300], [0.0, 0.0, 1e300, 0.0], 1.0, 0.1)
    np.testing.assert_allclose(huge, unit, rtol=0, atol=1e-15)
    assert np.linalg.norm(huge) == pytest.approx(1.0, abs=1e-15)
