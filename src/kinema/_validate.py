"""Input validation shared by the public API: shapes, finiteness, joint lookup."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ._kernels.constants import UNIFORM_SCALE_RTOL
from ._types import FloatArray
from .errors import BoneNotFoundError, ShapeError, SolverInputError

if TYPE_CHECKING:
    from .skeleton import Skeleton


JointRef = "int | str"

#: Vectors whose plain norm is at most this are normalised by :func:`unit_and_length`'s scaled path (below
#: about 1e-154 the squares underflow and lose digits).
UNDERFLOW_NORM = 1e-150

#: The most items a batch shape given as an argument may hold: NumPy's own limit on an array's size (a larger
#: one failed inside NumPy with a bare ValueError, "array is too big").
MAX_BATCH_ITEMS = np.iinfo(np.intp).max


def _physical_memory() -> int | None:
    """Bytes of physical memory (``os.sysconf``), or None where the platform does not say (Windows)."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None
    return total if total > 0 else None


#: The largest allocation kinema makes on request, in bytes: the machine's physical memory (2**40 bytes,
#: 1 TiB, where the platform does not report it).  Wherever a caller's count or batch shape sizes what kinema
#: allocates (``Skeleton.rest_pose``, ``Pose.broadcast``, forward kinematics' outputs, ``bone_mesh``'s
#: segments, ``SkinnedMesh.skin_weights``...), a request for more is refused before anything is allocated
#: (:func:`check_allocation`).  Physical memory rather than a fixed size: an array larger than all of memory can
#: never be filled without swapping the machine to a halt or the OOM killer ending the process, and NumPy
#: itself reports such a request only as a bare ``MemoryError`` (or not at all, under memory overcommit, until
#: the pages are written).  Smaller requests that still do not fit (other processes, a container's limit) are
#: left to NumPy.  Read at call time: a test or an embedding application may lower it.
MAX_ALLOCATION_BYTES: int = _physical_memory() or 2**40


def allocation_refused(nbytes: int) -> bool:
    """Whether an allocation of ``nbytes`` (a Python int: no overflow) is past :data:`MAX_ALLOCATION_BYTES`."""
    return nbytes > MAX_ALLOCATION_BYTES


def allocation_text(nbytes: int) -> str:
    """``nbytes`` and the limit, for an error message: ``"4.8e+12 bytes, more than the 2.5e+10 bytes kinema
    allocates at most (kinema._validate.MAX_ALLOCATION_BYTES, the machine's memory)"``."""
    return (f"{float(nbytes):.3g} bytes, more than the {float(MAX_ALLOCATION_BYTES):.3g} bytes kinema allocates "
            "at most (kinema._validate.MAX_ALLOCATION_BYTES, the machine's memory)")


def check_allocation(nbytes: int, what: str, expected: str, got: str) -> None:
    """:class:`ShapeError` (``what``: expected ``expected``, got ``got`` and the byte count) when an allocation of
    ``nbytes`` would pass :data:`MAX_ALLOCATION_BYTES`; call it before allocating."""
    if nbytes > MAX_ALLOCATION_BYTES:
        raise ShapeError(what, expected, f"{got}: {allocation_text(nbytes)}")


def _fmt_expected(trailing: tuple[int, ...], batch: bool) -> str:
    inner = ", ".join(str(t) for t in trailing)
    if batch:
        return f"(..., {inner})" if trailing else "(...)"
    return f"({inner},)" if len(trailing) == 1 else f"({inner})"


#: The native float64 dtype (numpy hands out this one instance for native float64 arrays).
_F64 = np.dtype(np.float64)

#: dtype kinds read as the numbers they hold: signed and unsigned ints, floats (any width and byte order).
_NUMERIC_KINDS = frozenset("iuf")


#: Element types of a list or tuple that hold no bool (checked by type, at C speed, before looking further).
_PLAIN_NUMBER_TYPES = frozenset({float, int, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16,
                                 np.int8, np.uint64, np.uint32, np.uint16, np.uint8})
_ROW_TYPES = frozenset({list, tuple})


def _holds_bool(x: Any) -> bool:
    """Whether the nested lists and tuples ``x`` hold a bool (Python's or NumPy's, or a bool array) among their
    items: NumPy reads ``[True, 0, 0]`` as the ints ``[1, 0, 0]``, so the array's dtype no longer tells."""
    if _PLAIN_NUMBER_TYPES.issuperset(map(type, x)):
        return False  # the common case: a row of numbers
    stack = [x]
    while stack:
        seq = stack.pop()
        types = set(map(type, seq))
        if types <= _PLAIN_NUMBER_TYPES:
            continue
        if bool in types or np.bool_ in types:
            return True
        if types <= _ROW_TYPES:
            stack.append(list(itertools.chain.from_iterable(seq)))  # a level of rows, flattened at C speed
            continue
        for v in seq:
            if isinstance(v, (list, tuple)):
                stack.append(v)
            elif isinstance(v, np.ndarray) and v.dtype.kind == "b":
                return True
    return False


def _numeric_array(x: Any, what: str, expected: str) -> NDArray[Any]:
    """``x`` as an array of real numbers, without converting anything else.

    Bools (alone, as a bool array, or among numbers in a list: ``[True, 0, 0]``), complex numbers, strings,
    bytes, dates, objects (``None``, mixed lists), ragged nested lists, sets and dicts are refused with a
    :class:`ShapeError` naming ``what``: ``numpy.asarray(..., float64)`` would quietly turn ``True`` into
    1, ``"1.0"`` into 1.0, ``None`` into NaN and a date into a day count.
    """
    if isinstance(x, (set, frozenset, dict, str, bytes)) or x is None:
        raise ShapeError(what, expected, f"non-numeric input (a {type(x).__name__}, not an array of numbers)")
    if isinstance(x, np.ndarray):
        # a subclass (np.matrix, a masked array) as the plain array of its numbers: a matrix's ``*`` is a matrix
        # product and its rows stay 2-D, so later arithmetic would not be the same numbers' arithmetic
        a = x if type(x) is np.ndarray else np.asarray(x)
    else:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError) as exc:  # ragged nested lists and the like
            ragged = "inhomogeneous" in str(exc)
            raise ShapeError(what, expected, f"{'ragged nested lists' if ragged else 'non-numeric input'} "
                                             f"({exc})") from None
        if a.dtype.kind in _NUMERIC_KINDS and isinstance(x, (list, tuple)) and _holds_bool(x):
            raise ShapeError(what, expected, "non-numeric input (a bool among the numbers; True is not 1.0)")
    if a.dtype.kind not in _NUMERIC_KINDS:
        raise ShapeError(what, expected, f"non-numeric input (an array of dtype {a.dtype}; real numbers needed)")
    return a


def as_float_array(x: Any, what: str, trailing: tuple[int, ...], *, batch: bool = True) -> FloatArray:
    """``x`` as a native-byte-order float64 array whose last dims are ``trailing``.

    The one conversion of every array input: ints, float32 and big-endian
    floats are read as the numbers they hold (a copy); a float64 array in
    native order is passed as is.  Raises :class:`ShapeError` naming
    ``what`` with expected versus got, for a wrong shape and for anything
    that is not real numbers (see :func:`_numeric_array`).
    """
    if type(x) is np.ndarray and x.dtype is _F64:
        if x.shape == trailing:
            return x  # one unbatched item in native float64 (the per-frame case): as it is, nothing to check
        a = x  # float64 in native order: as it is
    else:
        a = _numeric_array(x, what, _fmt_expected(trailing, batch))
        if a.dtype != np.float64 or not a.dtype.isnative:
            a = a.astype(np.float64)
    n = len(trailing)
    ok = a.ndim >= n and (batch or a.ndim == n) and a.shape[a.ndim - n:] == trailing
    if not ok:
        raise ShapeError(what, _fmt_expected(trailing, batch), tuple(a.shape))
    return a


def as_float_scalar(x: Any, what: str) -> float:
    """``x`` as a Python float (a real number or a 0-d array of one); :class:`SolverInputError` otherwise."""
    if isinstance(x, bool) or isinstance(x, np.bool_):
        raise SolverInputError(f"{what} must be a number, got {x!r}")
    try:
        a = _numeric_array(x, what, "a number")
    except ShapeError:
        raise SolverInputError(f"{what} must be a number, got {x!r}") from None
    if a.ndim != 0:
        raise SolverInputError(f"{what} must be a single number, got an array of shape {a.shape}")
    return float(a)


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


def broadcast_batch(*shapes: tuple[int, ...], names: Sequence[str] | None = None) -> tuple[int, ...]:
    """Broadcast batch shapes; :class:`ShapeError` when they do not broadcast.

    ``names``: the argument each shape belongs to (as many as ``shapes``), so that the error names the first
    argument whose batch dimensions do not broadcast with those before it: ``"weight batch dimensions:
    expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"``.  Without them it
    lists the shapes.
    """
    if not any(shapes):
        return ()  # all unbatched: the per-frame case
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        if names is None:
            got = " vs ".join(str(s) for s in shapes)
            raise ShapeError("batch dimensions", "broadcastable batch shapes", got) from None
    # the first argument that does not broadcast with those before it (the whole list does not, so one does)
    k = next(k for k in range(1, len(shapes)) if not _broadcasts(shapes[:k + 1]))
    before = ", ".join(f"{n} {s}" for n, s in zip(names[:k], shapes[:k], strict=True))
    raise ShapeError(f"{names[k]} batch dimensions", f"batch dimensions that broadcast with {before}", shapes[k])


def _broadcasts(shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether ``shapes`` broadcast together."""
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def batch_shape_arg(x: Any, what: str = "batch_shape", item_bytes: int | None = None) -> tuple[int, ...]:
    """A batch shape given as an argument: a tuple (or other sequence) of non-negative ints, or one int.

    :class:`ShapeError` naming ``what`` for anything else (floats, bools, strings, None, negative sizes), and,
    with ``item_bytes`` (the bytes the caller allocates per batch item), for a shape whose allocation would pass
    :data:`MAX_ALLOCATION_BYTES`.
    """
    expected = "a tuple of non-negative ints"
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        x = (x,)  # one batch dimension given as a number
    if not is_sequence(x):
        raise ShapeError(what, expected, not_sequence_text(x))
    dims = tuple(x)  # read once: a generator's sizes were used up by the check and the shape came out ()
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims):
        raise ShapeError(what, expected, repr(x) if isinstance(x, (tuple, list, np.ndarray)) else f"{dims!r}")
    shape = tuple(int(d) for d in dims)
    if math.prod(shape) > MAX_BATCH_ITEMS:  # (Python ints: the product cannot overflow)
        raise ShapeError(what, f"at most {MAX_BATCH_ITEMS} items in all", f"{shape}: {math.prod(shape)} items")
    if item_bytes is not None:
        check_allocation(math.prod(shape) * item_bytes, what, f"at most {MAX_ALLOCATION_BYTES // max(item_bytes, 1)} "
                         f"items in all ({item_bytes} bytes each)", f"{shape}")
    return shape


#: The set-like views that keep an order: a dict's keys and items come in insertion order.
_ORDERED_VIEWS: tuple[type[Any], ...] = (type({}.keys()), type({}.items()))


def is_unordered(x: Any) -> bool:
    """Whether ``x`` is a set (a ``set``, a ``frozenset`` or another :class:`collections.abc.Set`, a dict's keys
    and items views aside): its iteration order is arbitrary (for strings it changes with the hash seed), so it
    cannot stand where the order of the items means something (which target goes with which joint)."""
    return isinstance(x, AbstractSet) and not isinstance(x, _ORDERED_VIEWS)


def is_sequence(x: Any) -> bool:
    """Whether ``x`` is a sequence of items as an argument means one (steps, goals, joints): iterable, and not a
    string, bytes or a mapping (which iterate as characters or keys), nor a 0-d array (one item, which cannot be
    iterated), nor a set (:func:`is_unordered`: its order is arbitrary)."""
    if isinstance(x, np.ndarray):
        return x.ndim > 0
    return isinstance(x, Iterable) and not isinstance(x, (str, bytes, Mapping)) and not is_unordered(x)


def not_sequence_text(x: Any) -> str:
    """What ``x``, given where a sequence is expected and refused by :func:`is_sequence`, is, for the error:
    ``"a set: its order is arbitrary (give a list or a tuple)"``, a mapping's type, or ``repr(x)``."""
    if is_unordered(x):
        return f"a {type(x).__name__}: its order is arbitrary (give a list or a tuple)"
    if isinstance(x, Mapping):
        return f"a {type(x).__name__} (a mapping, not a sequence: give a list or a tuple)"
    return repr(x)


def check_flag(x: Any, what: str) -> bool:
    """A boolean option (``fixed_root``, ``adaptive_step`` ...): True or False (a Python bool or a numpy bool
    scalar); :class:`SolverInputError` naming ``what`` otherwise (``"False"``, 0, an array, None).

    ``bool(x)`` would read the string ``"False"`` as True and raise numpy's bare ValueError for an array."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise SolverInputError(f"{what} must be True or False, got {x!r}")


def positive_number(x: Any, what: str, allow_zero: bool = False) -> float:
    """``x`` as a finite float ``> 0`` (``>= 0`` with ``allow_zero``): a tolerance, a damping, a time step.

    :class:`SolverInputError` naming ``what`` for anything else (bools, strings, arrays, NaN, inf).
    """
    v = as_float_scalar(x, what)
    if not math.isfinite(v) or v < 0.0 or (v == 0.0 and not allow_zero):
        raise SolverInputError(f"{what} must be a finite number {'>=' if allow_zero else '>'} 0, got {x!r}")
    return v


def uniform_scale(s: NDArray[np.float64], rtol: float = UNIFORM_SCALE_RTOL) -> NDArray[np.bool_]:
    """Whether each scale ``s (..., 3)`` is uniform: ``|sx - sy| <= rtol |sy|`` and ``|sx - sz| <= rtol |sz|``.

    The one uniform-scale test (the kernels' :func:`kinema._kernels.chain.first_nonuniform` is the same
    formula).  Solvers use :data:`~kinema._kernels.constants.UNIFORM_SCALE_RTOL`; forward kinematics asks
    for ``rtol=0`` (exactly uniform), since it has an exact path for every other scale.
    """
    x, y, z = s[..., 0], s[..., 1], s[..., 2]
    if rtol == 0.0:
        return np.asarray((x == y) & (x == z))  # the same test, without the arithmetic
    return np.asarray((np.abs(x - y) <= rtol * np.abs(y)) & (np.abs(x - z) <= rtol * np.abs(z)))


def unit_and_length(v: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``v (..., k)`` scaled to unit length over the last axis, and the lengths ``(..., 1)``.

    Finite vectors of any size: where the plain norm overflows to inf
    (components near 1e155 and beyond) or underflows (below about 1e-154),
    that vector is first divided by its largest component, so its direction
    is still exact (its length may be inf).  A zero vector gives zeros and
    length 0.  Every other vector comes out as ``v / norm(v)``, the same bits
    in a batch as alone.
    """
    with np.errstate(over="ignore"):
        n = np.linalg.norm(v, axis=-1, keepdims=True)
    plain = np.isfinite(n) & (n > UNDERFLOW_NORM)
    if np.all(plain):
        return v / n, n  # the common case
    m = np.max(np.abs(v), axis=-1, keepdims=True)
    scaled = v / np.where(m > 0.0, m, 1.0)
    n_scaled = np.linalg.norm(scaled, axis=-1, keepdims=True)  # in [1, sqrt(k)], or 0 for a zero vector
    with np.errstate(over="ignore"):
        length = m * n_scaled
    unit = scaled / np.where(n_scaled > 0.0, n_scaled, 1.0)
    return np.where(plain, v / np.where(plain, n, 1.0), unit), np.where(plain, n, length)
