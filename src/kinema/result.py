"""What every solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .pose import Pose

__all__ = ["SolveResult"]

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
        dataclass ``__init__``, which sets each field through ``object.__setattr__``; the fields are
        written straight into the new instance's ``__dict__``)."""
        res = _new(cls)
        d = res.__dict__
        d["pose"] = pose
        d["reached"] = reached
        d["error"] = error
        d["iterations"] = iterations
        d["limits_hit"] = limits_hit
        d["state"] = state
        return res


_new = object.__new__
