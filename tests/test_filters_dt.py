"""kinema.filters: a step of dt = 0 records its sample, and dt is checked on every update (the first too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kinema.errors import SolverInputError
from kinema.filters import AngularSpeedLimiter, CriticallyDampedSpring, OneEuroFilter

MAKERS: dict[str, Callable[[], Any]] = {
    "spring": lambda: CriticallyDampedSpring(10.0),
    "one-euro": lambda: OneEuroFilter(1.0, 0.0),
    "one-euro-beta": lambda: OneEuroFilter(0.5, 2.0, 1.0),
}


def _after_first_step(make: Callable[[], Any], first_dt: float) -> np.ndarray:
    f = make()
    f.update(np.zeros(3), 0.0)
    zero_step = f.update(np.ones(3), first_dt)
    np.testing.assert_allclose(zero_step, 0.0, atol=1e-10)  # no time has passed: (about) where it was
    return np.asarray(f.update(np.ones(3), 0.1))


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_zero_step_records_its_sample(name: str) -> None:
    """dt = 0 is the limit of a tiny dt: the value stays, but the new sample is the latest input."""
    make = MAKERS[name]
    tiny = _after_first_step(make, 1e-300)
    small = _after_first_step(make, 1e-12)
    zero = _after_first_step(make, 0.0)
    np.testing.assert_allclose(tiny, small, rtol=1e-9)
    np.testing.assert_allclose(zero, tiny, rtol=1e-12, atol=1e-12)
    assert np.all(zero > 0.2)  # it moved towards the new sample over the whole 0.1 s step


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_zero_step_keeps_the_value_bit_for_bit(name: str) -> None:
    f = MAKERS[name]()
    f.update(np.array([0.1, 0.2, 0.3]), 0.0)
    before = f.update(np.array([0.4, 0.5, 0.6]), 0.05)
    same = f.update(np.array([5.0, -5.0, 2.0]), 0.0)
    np.testing.assert_array_equal(same, before)


def test_a_zero_step_of_the_limiter_holds_the_last_output() -> None:
    """The limiter keeps the last *output* (no input to record): dt = 0 allows no turn, as a tiny dt."""
    q0 = np.array([0.0, 0.0, 0.0, 1.0])
    q1 = np.array([0.0, 0.0, np.sin(0.5), np.cos(0.5)])  # 1 rad about z
    outs = []
    for first_dt in (0.0, 1e-300, 1e-12):
        lim = AngularSpeedLimiter(1.0)
        lim.update(q0, 0.0)
        np.testing.assert_allclose(lim.update(q1, first_dt), q0, atol=1e-11)
        outs.append(lim.update(q1, 0.1))
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-14)
    np.testing.assert_allclose(outs[0], outs[2], atol=1e-11)


BAD_DT = [float("nan"), float("inf"), -1.0, "soon", None, True, np.array([0.1, 0.2])]
BAD_IDS = ["nan", "inf", "negative", "str", "None", "bool", "array"]


@pytest.mark.parametrize("dt", BAD_DT, ids=BAD_IDS)
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_the_first_update_checks_dt(name: str, dt: Any) -> None:
    f = MAKERS[name]()
    with pytest.raises(SolverInputError, match="dt"):
        f.update(np.zeros(3), dt)
    assert f.value is None  # refused: no state was set
    f.update(np.zeros(3), 0.0)
    with pytest.raises(SolverInputError, match="dt"):  # and later ones, as before
        f.update(np.zeros(3), dt)


@pytest.mark.parametrize("dt", BAD_DT, ids=BAD_IDS)
def test_the_limiters_first_update_checks_dt(dt: Any) -> None:
    lim = AngularSpeedLimiter(1.0)
    q = np.array([0.0, 0.0, 0.0, 1.0])
    with pytest.raises(SolverInputError, match="dt"):
        lim.update(q, dt)
    assert lim.previous is None
    lim.update(q, 0.0)
    with pytest.raises(SolverInputError, match="dt"):
        lim.update(q, dt)
