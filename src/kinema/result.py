"""What every solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .pose import Pose

__all__ = ["SolveResult"]

#: ``np.int64`` scalars for small counts, made once: ``np.int64(n)`` from a
#: Python int costs about 0.6 us, a fifth of a single solve's Python time.
_INT64 = list(np.arange(1024, dtype=np.int64))


def int64_scalar(n: int) -> np.int64:
    """``np.int64(n)``, from a table for ``0 <= n < 1024`` (iteration and limit-hit counts of one solve)."""
    return _INT64[n] if 0 <= n < 1024 else np.int64(n)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SolveResult:
    """The outcome of a solve, with diagnostics per batch item.

    * ``pose``: the solved :class:`~kinema.Pose` (the ``out=`` pose when given).
    * ``reached``: ``(*batch,)`` bool, end within tolerance of the requested target.
    * ``error``: ``(*batch,)`` float, world distance from the end joint to the
      requested target (not to a clamped one).
    * ``iterations``: ``(*batch,)`` int, sweeps used (1 for analytic solvers).
    * ``limits_hit``: ``(*batch,)`` int, how many joint-limit clamps changed a
      rotation during the solve (0 when no limits).
    * ``state``: solver-specific data for the next frame or for reporting,
      for example ``"bend_direction"`` (two-bone) or ``"moved"`` (chains).
    """

    pose: Pose
    reached: NDArray[np.bool_]
    error: NDArray[np.float64]
    iterations: NDArray[np.int64]
    limits_hit: NDArray[np.int64]
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _trusted(cls, pose: Pose, reached: NDArray[np.bool_] | np.bool_, error: NDArray[np.float64] | np.float64,
                 iterations: NDArray[np.int64] | np.int64, limits_hit: NDArray[np.int64] | np.int64,
                 state: dict[str, Any]) -> SolveResult:
        """A result around arrays already known to be right (solvers' hot path: skips the frozen
        dataclass ``__init__``, which sets each field through ``object.__setattr__``)."""
        res = cls.__new__(cls)
        res.__dict__.update(pose=pose, reached=reached, error=error, iterations=iterations, limits_hit=limits_hit,
                            state=state)
        return res


_new = object.__new__
_f64 = np.float64
_TRUE = np.True_
_FALSE = np.False_


def single_result(translations: NDArray[np.float64], rotations: NDArray[np.float64], scales: NDArray[np.float64],
                  reached: bool, error: float, iterations: int, limits_hit: int, state: dict[str, Any]) -> SolveResult:
    """The :class:`SolveResult` of one unbatched solve, from the kernel's plain return values.

    The single-solve hot path: builds the output :class:`~kinema.Pose` and
    the result without their constructors (the arrays are the solver's own
    fresh copies, already valid), with numpy scalars for the diagnostics.
    About 0.6 us less than ``SolveResult._trusted(Pose._trusted(...), ...)``,
    a tenth of a two-bone call.
    """
    pose = _new(Pose)
    pose.translations = translations
    pose.rotations = rotations
    pose.scales = scales
    res = _new(SolveResult)
    d = res.__dict__
    d["pose"] = pose
    d["reached"] = _TRUE if reached else _FALSE
    d["error"] = _f64(error)
    d["iterations"] = _INT64[iterations] if 0 <= iterations < 1024 else np.int64(iterations)
    d["limits_hit"] = _INT64[limits_hit] if 0 <= limits_hit < 1024 else np.int64(limits_hit)
    d["state"] = state
    return res  # type: ignore[no-any-return]

