"""Input validation shared by the public API: shapes, finiteness, joint lookup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .errors import BoneNotFoundError, ShapeError, SolverInputError

if TYPE_CHECKING:
    from .skeleton import Skeleton

FloatArray = NDArray[np.float64]

JointRef = "int | str"


def _fmt_expected(trailing: tuple[int, ...], batch: bool) -> str:
    inner = ", ".join(str(t) for t in trailing)
    if batch:
        return f"(..., {inner})" if trailing else "(...)"
    return f"({inner},)" if len(trailing) == 1 else f"({inner})"


def as_float_array(x: Any, what: str, trailing: tuple[int, ...], *, batch: bool = True) -> FloatArray:
    """``x`` as a float64 array whose last dims are ``trailing``.

    Raises :class:`ShapeError` naming ``what`` with expected versus got.
    """
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ShapeError(what, _fmt_expected(trailing, batch), f"non-numeric input ({exc})") from None
    n = len(trailing)
    ok = a.ndim >= n and (batch or a.ndim == n) and tuple(a.shape[a.ndim - n:]) == trailing
    if not ok:
        raise ShapeError(what, _fmt_expected(trailing, batch), tuple(a.shape))
    return a


def require_finite(a: FloatArray, what: str, error: type[Exception] = SolverInputError) -> None:
    """Raise ``error`` when ``a`` holds NaN or inf, saying where the first one is."""
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        raise error(f"{what} contains NaN or inf (first at index {tuple(int(i) for i in bad)})")


def resolve_joint(skeleton: Skeleton, joint: int | str | np.integer[Any]) -> int:
    """Index of ``joint`` given by name or index; :class:`BoneNotFoundError` otherwise."""
    if isinstance(joint, str):
        return skeleton.index(joint)
    if isinstance(joint, (int, np.integer)) and not isinstance(joint, bool):
        j = int(joint)
        n = skeleton.n_joints
        if -n <= j < n:
            return j % n
        raise BoneNotFoundError(j, skeleton.names, f"joint index {j} is out of range for a skeleton of {n} joints")
    raise BoneNotFoundError(joint, skeleton.names, f"a joint is a name or an index, got {type(joint).__name__}")


def broadcast_batch(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """Broadcast batch shapes; :class:`ShapeError` when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        got = " vs ".join(str(s) for s in shapes)
        raise ShapeError("batch dimensions", "broadcastable batch shapes", got) from None
