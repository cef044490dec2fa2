"""Rotation math on batches of quaternions.

Conventions, everywhere in kinema:

* Quaternions are **xyzw** (scalar last, as glTF, three.js and scipy), shape
  ``(..., 4)``.  Inputs need not be unit length; they are normalised, at any
  finite size (a quaternion or a vector with components of 1e300 is the
  rotation or direction it holds; one shorter than 1e-12 counts as zero).
* Rotations are active; ``multiply(a, b)`` applies ``b`` first, then ``a``.
* Angles are radians unless ``degrees=True`` (True or False: anything else
  raises :class:`~kinema.SolverInputError`).
* NaN or inf in any input raises :class:`~kinema.SolverInputError` naming the
  argument (none of these functions returns NaN).
* Single in, single out: a ``(4,)`` quaternion gives a ``(4,)`` result;
  leading batch dimensions broadcast like NumPy.
* Euler sequences follow scipy: upper case ``"ZXY"`` is intrinsic (rotate
  about Z, then the new X, then the new Y: ``q = Rz Rx Ry``; this is what a
  BVH channel order ``Zrotation Xrotation Yrotation`` means), lower case
  ``"zxy"`` extrinsic.  All 12 sequences are accepted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._types import FloatArray
from ._validate import (
    as_float_array,
    batch_shape_arg,
    broadcast_batch,
    check_flag,
    positive_number,
    require_finite,
    unit_and_length,
)
from .errors import ShapeError, SolverInputError

__all__ = [
    "identity",
    "multiply",
    "conjugate",
    "inverse",
    "normalize",
    "canonical",
    "equal",
    "rotate",
    "as_matrix",
    "from_matrix",
    "from_axis_angle",
    "as_axis_angle",
    "from_rotvec",
    "as_rotvec",
    "from_euler",
    "as_euler",
    "slerp",
    "nlerp",
    "angle_between",
    "from_two_vectors",
    "swing_twist",
    "EULER_SEQUENCES",
]


#: A vector no longer than this has no direction (:data:`kinema._kernels.quat.VEC_NORM_EPS`).
_VEC_NORM_EPS = 1e-145

#: The 12 intrinsic Euler sequences (their lower-case forms are extrinsic).
EULER_SEQUENCES = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "XYX", "XZX", "YXY", "YZY", "ZXZ", "ZYZ")


def _kern() -> Any:
    from ._kernels._tier import kernels

    return kernels("rotation")


def _batch(items: list[tuple[FloatArray, tuple[int, ...], str]]) -> tuple[int, ...]:
    """The broadcast batch shape of the inputs ``(array, tail, argument name)``; :class:`ShapeError` naming the
    arguments and their batch shapes when they do not broadcast."""
    shapes = [a.shape[: a.ndim - len(t)] for a, t, _ in items]
    try:
        return broadcast_batch(*shapes)
    except ShapeError:
        names = [name for _, _, name in items]
        got = " vs ".join(f"{name} {shape}" for name, shape in zip(names, shapes, strict=True))
        raise ShapeError(f"batch dimensions of {', '.join(names[:-1])} and {names[-1]}", "broadcastable batch shapes",
                         got) from None


def _flat(items: list[tuple[FloatArray, tuple[int, ...], str]]) -> tuple[tuple[int, ...], int, list[FloatArray]]:
    """The inputs ``(array, tail, argument name)`` broadcast to one batch (:func:`_batch`), each as ``n``
    writeable C-contiguous rows ``(n, *tail)``.

    Writeable always: numba types a read-only array apart from a writeable one, so a broadcast view
    (read-only) here and a copy there would compile each kernel twice.  An input that already has the
    batch shape is used as it is when it is C-contiguous and writeable (no copy).
    """
    batch = _batch(items)
    n = int(np.prod(batch)) if batch else 1
    flat = []
    for a, t, _ in items:
        rows = np.ascontiguousarray(a if a.shape == batch + t else np.broadcast_to(a, batch + t)).reshape((n,) + t)
        flat.append(rows if rows.flags.writeable else rows.copy())
    return batch, n, flat


def identity(shape: tuple[int, ...] = ()) -> FloatArray:
    """Identity quaternions of batch ``shape``: ``(*shape, 4)``."""
    q = np.zeros(batch_shape_arg(shape, "shape", item_bytes=4 * 8) + (4,))
    q[..., 3] = 1.0
    return q


def multiply(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Hamilton product ``a * b`` (apply ``b``, then ``a``)."""
    qa = _finite_numbers(a, "a", (4,))
    qb = _finite_numbers(b, "b", (4,))
    batch, n, (fa, fb) = _flat([(qa, (4,), "a"), (qb, (4,), "b")])
    out = np.empty((n, 4))
    _kern().mul(fa, fb, out)
    return out.reshape(batch + (4,))


def conjugate(q: ArrayLike) -> FloatArray:
    """``(-x, -y, -z, w)``; the inverse of a unit quaternion."""
    a = _finite_numbers(q, "q", (4,)).copy()
    a[..., :3] *= -1.0
    return a


def inverse(q: ArrayLike) -> FloatArray:
    """Inverse rotation (the conjugate of the normalised quaternion)."""
    return conjugate(normalize(q))


def normalize(q: ArrayLike) -> FloatArray:
    """Unit quaternions; a (near) zero quaternion becomes the identity."""
    return _normalized(_finite_numbers(q, "q", (4,)), "q")


def _normalized(a: FloatArray, what: str) -> FloatArray:
    """:func:`normalize` of ``a``, already checked (:func:`_finite_numbers`) as the argument ``what``."""
    batch, n, (f,) = _flat([(a, (4,), what)])
    out = np.empty((n, 4))
    _kern().normalize(f, out)
    return out.reshape(batch + (4,))


def canonical(q: ArrayLike) -> FloatArray:
    """``q`` or ``-q`` (same rotation), whichever has ``w >= 0``."""
    a = _finite_numbers(q, "q", (4,))
    batch, n, (f,) = _flat([(a, (4,), "q")])
    out = np.empty((n, 4))
    _kern().canonical(f, out)
    return out.reshape(batch + (4,))


def equal(a: ArrayLike, b: ArrayLike, atol: float = 1e-9) -> NDArray[np.bool_] | bool:
    """Whether ``a`` and ``b`` are the same rotation (``q`` and ``-q`` are equal), to ``atol``
    on the quaternion components.  Returns a bool for single inputs."""
    atol = positive_number(atol, "atol", allow_zero=True)
    qa = _finite_numbers(a, "a", (4,))
    qb = _finite_numbers(b, "b", (4,))
    _batch([(qa, (4,), "a"), (qb, (4,), "b")])  # a ShapeError naming a and b, as multiply's, before any work
    qa = _normalized(qa, "a")
    qb = _normalized(qb, "b")
    same = np.all(np.abs(qa - qb) <= atol, axis=-1) | np.all(np.abs(qa + qb) <= atol, axis=-1)
    return bool(same) if np.ndim(same) == 0 else same


def rotate(q: ArrayLike, v: ArrayLike) -> FloatArray:
    """Rotate vectors ``v (..., 3)`` by ``q (..., 4)``."""
    qa = _finite_numbers(q, "q", (4,))
    va = _finite_numbers(v, "v", (3,))
    batch, n, (fq, fv) = _flat([(qa, (4,), "q"), (va, (3,), "v")])
    out = np.empty((n, 3))
    _kern().rotate(fq, fv, out)
    return out.reshape(batch + (3,))


def as_matrix(q: ArrayLike) -> FloatArray:
    """3x3 rotation matrices ``(..., 3, 3)`` (acting on column vectors)."""
    a = _finite_numbers(q, "q", (4,))
    batch, n, (f,) = _flat([(a, (4,), "q")])
    out = np.empty((n, 3, 3))
    _kern().to_matrix(f, out)
    return out.reshape(batch + (3, 3))


#: A matrix whose columns are orthonormal to within this (largest ``|M^T M - I|`` entry) is read as the
#: rotation it is; any other is first replaced by its nearest rotation (see :func:`from_matrix`).
ORTHONORMAL_TOL = 1e-12


def from_matrix(m: ArrayLike) -> FloatArray:
    """Quaternions (canonical, ``w >= 0``) of rotation matrices ``(..., 3, 3)``.

    A matrix that is not orthonormal (within :data:`ORTHONORMAL_TOL`: float32 round-off, a scaled or a
    stretched rotation ``M = R P`` with ``P`` symmetric positive definite) gives its nearest rotation
    ``R = U V^T`` from ``M = U S V^T`` (the orthogonal factor of the polar decomposition, as scipy's
    ``from_matrix`` does).  :class:`~kinema.SolverInputError` for NaN or inf and for a matrix with no
    rotation in it: a determinant of zero (singular) or below (a mirror).
    """
    a = _finite_numbers(m, "m", (3, 3))
    batch, n, (f,) = _flat([(a, (3, 3), "m")])
    # slogdet's sign: the determinant's sign without overflowing (a matrix of 1e300 entries has a finite one).
    sign = np.linalg.slogdet(f)[0]
    if not np.all(sign > 0.0):
        bad = int(np.nonzero(~(sign > 0.0))[0][0])
        where = tuple(int(i) for i in np.unravel_index(bad, batch)) if batch else ()
        kind = "singular (determinant 0)" if sign[bad] == 0.0 else "a mirror (negative determinant)"
        raise SolverInputError(f"m{list(where) if where else ''} is not a rotation matrix: it is {kind}")
    with np.errstate(over="ignore", invalid="ignore"):
        off = np.max(np.abs(np.matmul(np.swapaxes(f, -1, -2), f) - np.eye(3)), axis=(-2, -1))
    skew = ~(off <= ORTHONORMAL_TOL)  # inf or NaN from entries near 1e154 and beyond: projected too
    if np.any(skew):
        u, _, vt = np.linalg.svd(f[skew])
        f = f.copy()
        f[skew] = u @ vt
    out = np.empty((n, 4))
    _kern().from_matrix(f, out)
    return out.reshape(batch + (4,))


def from_axis_angle(axis: ArrayLike, angle: ArrayLike, degrees: bool = False) -> FloatArray:
    """Rotation by ``angle (...)`` about ``axis (..., 3)`` (normalised; zero axis gives identity).

    ``angle`` must be finite (:class:`~kinema.SolverInputError`)."""
    degrees = check_flag(degrees, "degrees")
    ax = _finite_numbers(axis, "axis", (3,))
    an = _finite_numbers(angle, "angle")
    if degrees:
        an = np.deg2rad(an)
    batch, n, (fa, fn) = _flat([(ax, (3,), "axis"), (an, (), "angle")])
    out = np.empty((n, 4))
    _kern().from_axis_angle(fa, fn, out)
    return out.reshape(batch + (4,))


def as_axis_angle(q: ArrayLike, degrees: bool = False) -> tuple[FloatArray, FloatArray]:
    """``(axis (..., 3), angle (...))`` with angle in [0, pi]; axis +x for the identity."""
    degrees = check_flag(degrees, "degrees")
    rv = as_rotvec(q)
    angle = np.linalg.norm(rv, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        axis = np.where(angle[..., None] > 0.0, rv / np.where(angle > 0.0, angle, 1.0)[..., None],
                        np.array([1.0, 0.0, 0.0]))
    return axis, (np.rad2deg(angle) if degrees else angle)


def from_rotvec(r: ArrayLike, degrees: bool = False) -> FloatArray:
    """Quaternions of rotation vectors (axis times angle) ``(..., 3)``; finite, and no longer than the largest
    float (:class:`~kinema.SolverInputError`)."""
    degrees = check_flag(degrees, "degrees")
    a: FloatArray = _finite_numbers(r, "rotvec", (3,))
    if degrees:
        a = np.asarray(np.deg2rad(a), dtype=np.float64)
    batch, n, (f,) = _flat([(a, (3,), "rotvec")])
    out = np.empty((n, 4))
    _kern().from_rotvec(f, out)
    if np.isnan(out).any():  # the kernel's mark for a length beyond the largest float
        bad = np.argwhere(np.isnan(out[:, 0]))[0]
        raise SolverInputError(f"rotvec is longer than the largest float (item {int(bad[0])}): no angle to turn by")
    return out.reshape(batch + (4,))


def as_rotvec(q: ArrayLike, degrees: bool = False) -> FloatArray:
    """Rotation vectors ``(..., 3)``, angle in [0, pi]."""
    degrees = check_flag(degrees, "degrees")
    a = _finite_numbers(q, "q", (4,))
    batch, n, (f,) = _flat([(a, (4,), "q")])
    out = np.empty((n, 3))
    _kern().to_rotvec(f, out)
    res: FloatArray = out.reshape(batch + (3,))
    return np.rad2deg(res) if degrees else res


def _finite_numbers(x: ArrayLike, what: str, trailing: tuple[int, ...] = ()) -> FloatArray:
    """The one conversion of this module's inputs (quaternions, vectors, matrices, angles, interpolation
    parameters): real numbers (``ShapeError`` otherwise), finite (``SolverInputError``: NaN is no rotation,
    and a sine of inf has no value), as a plain ndarray."""
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        # An ndarray subclass passes as_float_array as it is and came back as itself: conjugate returned an
        # np.matrix, whose * is a matrix product (its sign flip made 0.0 of -0.0).  Its data as a plain array.
        x = np.asarray(x)
    a = as_float_array(x, what, trailing)
    require_finite(a, what)
    return a


def _parse_seq(seq: str) -> tuple[int, int, int, bool]:
    """``(i, j, k, extrinsic)`` of an Euler sequence; :class:`~kinema.SolverInputError` (a ``ValueError``) for
    anything else."""
    if not isinstance(seq, str) or len(seq) != 3:
        raise SolverInputError(f"an Euler sequence is three axes such as 'ZXY' or 'xyz', got {seq!r}")
    if seq.isupper() and set(seq) <= set("XYZ"):
        extrinsic = False
    elif seq.islower() and set(seq) <= set("xyz"):
        extrinsic = True
    else:
        raise SolverInputError(f"Euler sequence {seq!r}: use all upper case (intrinsic) or all lower case "
                               "(extrinsic) x/y/z")
    if seq[0] == seq[1] or seq[1] == seq[2]:
        raise SolverInputError(f"Euler sequence {seq!r}: consecutive axes must differ")
    ax = ["xyz".index(c) for c in seq.lower()]
    return ax[0], ax[1], ax[2], extrinsic


def from_euler(seq: str, angles: ArrayLike, degrees: bool = False) -> FloatArray:
    """Quaternions of Euler ``angles (..., 3)`` (finite) for sequence ``seq`` (see module docs)."""
    i, j, k, ext = _parse_seq(seq)
    degrees = check_flag(degrees, "degrees")
    a: FloatArray = _finite_numbers(angles, "angles", (3,))
    if degrees:
        a = np.asarray(np.deg2rad(a), dtype=np.float64)
    batch, n, (f,) = _flat([(a, (3,), "angles")])
    out = np.empty((n, 4))
    _kern().from_euler(f, i, j, k, ext, out)
    return out.reshape(batch + (4,))


def as_euler(q: ArrayLike, seq: str, degrees: bool = False) -> FloatArray:
    """Euler angles ``(..., 3)`` of ``q`` for ``seq``; wrapped to [-pi, pi).

    At gimbal lock (middle angle within 1e-7 of its singular value) the third
    angle is zero and the first carries the rotation, as in scipy.
    """
    i, j, k, ext = _parse_seq(seq)
    degrees = check_flag(degrees, "degrees")
    a = _finite_numbers(q, "q", (4,))
    batch, n, (f,) = _flat([(a, (4,), "q")])
    out = np.empty((n, 3))
    _kern().to_euler(f, i, j, k, ext, out)
    res: FloatArray = out.reshape(batch + (3,))
    return np.rad2deg(res) if degrees else res


def slerp(a: ArrayLike, b: ArrayLike, t: ArrayLike) -> FloatArray:
    """Spherical interpolation from ``a`` (t=0) to ``b`` (t=1) along the shorter arc."""
    qa = _finite_numbers(a, "a", (4,))
    qb = _finite_numbers(b, "b", (4,))
    tt = _finite_numbers(t, "t")
    batch, n, (fa, fb, ft) = _flat([(qa, (4,), "a"), (qb, (4,), "b"), (tt, (), "t")])
    out = np.empty((n, 4))
    _kern().slerp(fa, fb, ft, out)
    return out.reshape(batch + (4,))


def nlerp(a: ArrayLike, b: ArrayLike, t: ArrayLike) -> FloatArray:
    """Normalised linear interpolation along the shorter arc (cheaper, not constant speed)."""
    qa = _finite_numbers(a, "a", (4,))
    qb = _finite_numbers(b, "b", (4,))
    tt = _finite_numbers(t, "t")
    batch, n, (fa, fb, ft) = _flat([(qa, (4,), "a"), (qb, (4,), "b"), (tt, (), "t")])
    out = np.empty((n, 4))
    _kern().nlerp(fa, fb, ft, out)
    return out.reshape(batch + (4,))


def angle_between(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Angle in [0, pi] of the rotation taking ``a`` to ``b``: ``2 atan2(|v|, |w|)`` of ``a^-1 b``."""
    qa = _finite_numbers(a, "a", (4,))
    qb = _finite_numbers(b, "b", (4,))
    batch, n, (fa, fb) = _flat([(qa, (4,), "a"), (qb, (4,), "b")])
    out = np.empty(n)
    _kern().angle_between(fa, fb, out)
    return out.reshape(batch)


def from_two_vectors(a: ArrayLike, b: ArrayLike) -> FloatArray:
    """Minimal rotation taking direction ``a (..., 3)`` to direction ``b (..., 3)``.

    Exact at every angle, 180 degrees included, without trigonometry: with
    unit ``u, v`` and ``s = u + v`` it is ``normalize(u x s, |s|^2 / 2)``
    (the half-way quaternion; ``|s|`` keeps full relative precision near 180
    degrees where ``1 + u . v`` would not).  A stable perpendicular axis is
    used only for truly opposite vectors; a zero vector gives the identity.
    """
    va = _finite_numbers(a, "a", (3,))
    vb = _finite_numbers(b, "b", (3,))
    batch, n, (fa, fb) = _flat([(va, (3,), "a"), (vb, (3,), "b")])
    out = np.empty((n, 4))
    _kern().from_two_vectors(fa, fb, out)
    return out.reshape(batch + (4,))


def swing_twist(q: ArrayLike, axis: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Split ``q`` into ``(swing, twist)`` with ``q = swing * twist``.

    ``twist`` is the rotation about ``axis (..., 3)`` (in the frame ``q``
    acts on), ``swing`` rotates about an axis perpendicular to it.  A
    180-degree swing has no defined twist; it is the identity then.
    """
    qa = _finite_numbers(q, "q", (4,))
    ax = _finite_numbers(axis, "axis", (3,))
    if np.any(unit_and_length(ax)[1] <= _VEC_NORM_EPS):  # the kernel's "no direction" (any size above is exact)
        raise ShapeError("axis", f"non-zero vectors longer than {_VEC_NORM_EPS:g} (a direction)",
                         "a zero vector or a shorter one")
    batch, n, (fq, fa) = _flat([(qa, (4,), "q"), (ax, (3,), "axis")])
    sw = np.empty((n, 4))
    tw = np.empty((n, 4))
    _kern().swing_twist(fq, fa, sw, tw)
    return sw.reshape(batch + (4,)), tw.reshape(batch + (4,))
