"""Poses (local joint transforms with batch dimensions) and clips (poses over time)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import (
    as_float_array,
    as_float_scalar,
    batch_shape_arg,
    broadcast_batch,
    check_allocation,
    positive_number,
    require_finite,
)
from .errors import BatchIndexError, ShapeError, SolverInputError

__all__ = ["Pose", "Clip", "TIME_EPS", "resample_times", "resampled_frame_count", "key_brackets"]

#: Slack when counting resampled frames: ``ceil(t_end * fps - TIME_EPS)``, so
#: an end time on the grid up to float round-off does not add a frame.
TIME_EPS = 1e-9

#: Bytes a pose holds per joint and batch item: float64 translations (3), rotations (4) and scales (3).
POSE_JOINT_BYTES = 8 * (3 + 4 + 3)


def _pose_array(value: Any, name: str, k: int, n: int, other: str) -> NDArray[np.float64]:
    """A replacement pose array ``(..., n, k)``: :func:`as_float_array` (read as the numbers it holds), with ``n``
    joints as the pose's ``other`` array (:class:`ShapeError` otherwise)."""
    a = as_float_array(value, f"pose {name}", (k,))
    if a.ndim < 2 or a.shape[-2] != n:
        raise ShapeError(f"pose {name}", f"(..., {n}, {k}) to match {n} {other}", tuple(a.shape))
    return a


def _pose_scales(scales: Any, n: int) -> NDArray[np.float64]:
    """The scales of a pose of ``n`` joints: ones ``(n, 3)`` for None, else checked as the constructor does."""
    if scales is None:
        return np.ones((n, 3))
    s = as_float_array(scales, "pose scales", (3,))
    if s.ndim < 2 or s.shape[-2] != n:
        raise ShapeError("pose scales", f"(..., {n}, 3)", tuple(s.shape))
    return s


class Pose:
    """Local joint transforms, batch-first.

    * ``translations``: ``(*batch, J, 3)`` local translation in the parent's space.
    * ``rotations``: ``(*batch, J, 4)`` local rotation, unit quaternion **xyzw**.
    * ``scales``: ``(*batch, J, 3)`` local scale (ones when omitted).

    The three arrays' batch dimensions only need to broadcast against each
    other (a clip may animate rotations per frame and share one set of
    translations).  The arrays are held, not copied: solvers return new
    poses, or write into a caller-owned pose passed as ``out=``.

    Each array may be replaced (``pose.rotations = ...``): the value goes
    through the constructor's conversion and checks (ints, float32 and
    big-endian arrays are read as the numbers they hold; the joint count and
    the batch dimensions must agree with the other two arrays, else
    :class:`~kinema.ShapeError`; ``pose.scales = None`` means ones).  Writing
    into an array in place (``pose.rotations[0] = ...``) is not checked.
    """

    __slots__ = ("_translations", "_rotations", "_scales")

    def __init__(self, translations: ArrayLike, rotations: ArrayLike, scales: ArrayLike | None = None) -> None:
        t = as_float_array(translations, "pose translations", (3,))
        r = as_float_array(rotations, "pose rotations", (4,))
        if t.ndim < 2:
            raise ShapeError("pose translations", "(..., J, 3)", tuple(t.shape))
        if r.ndim < 2:
            raise ShapeError("pose rotations", "(..., J, 4)", tuple(r.shape))
        n = t.shape[-2]
        if r.shape[-2] != n:
            raise ShapeError("pose rotations", f"(..., {n}, 4) to match {n} translations", tuple(r.shape))
        s = _pose_scales(scales, n)
        broadcast_batch(t.shape[:-2], r.shape[:-2], s.shape[:-2])
        self._translations: NDArray[np.float64] = t
        self._rotations: NDArray[np.float64] = r
        self._scales: NDArray[np.float64] = s

    @classmethod
    def _trusted(cls, translations: NDArray[np.float64], rotations: NDArray[np.float64],
                 scales: NDArray[np.float64]) -> Pose:
        """A pose around float64 arrays already known to be valid (solvers' hot path: no re-validation)."""
        p = cls.__new__(cls)
        p._translations = translations
        p._rotations = rotations
        p._scales = scales
        return p

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and copy by the constructor's arguments (checked again when loaded)."""
        return (Pose, (self._translations, self._rotations, self._scales))

    # The three arrays: read as they are; replaced only through the constructor's conversion and checks.
    @property
    def translations(self) -> NDArray[np.float64]:
        return self._translations

    @translations.setter
    def translations(self, value: ArrayLike) -> None:
        n = self._rotations.shape[-2]
        t = _pose_array(value, "translations", 3, n, "rotations")
        broadcast_batch(t.shape[:-2], self._rotations.shape[:-2], self._scales.shape[:-2])
        self._translations = t

    @property
    def rotations(self) -> NDArray[np.float64]:
        return self._rotations

    @rotations.setter
    def rotations(self, value: ArrayLike) -> None:
        n = self._translations.shape[-2]
        r = _pose_array(value, "rotations", 4, n, "translations")
        broadcast_batch(self._translations.shape[:-2], r.shape[:-2], self._scales.shape[:-2])
        self._rotations = r

    @property
    def scales(self) -> NDArray[np.float64]:
        return self._scales

    @scales.setter
    def scales(self, value: ArrayLike | None) -> None:
        s = _pose_scales(value, self._translations.shape[-2])
        broadcast_batch(self._translations.shape[:-2], self._rotations.shape[:-2], s.shape[:-2])
        self._scales = s

    @property
    def n_joints(self) -> int:
        return int(self._translations.shape[-2])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return broadcast_batch(self._translations.shape[:-2], self._rotations.shape[:-2], self._scales.shape[:-2])

    def broadcast(self, batch_shape: tuple[int, ...] | None = None) -> Pose:
        """A copy whose three arrays all have the full shape ``(*batch_shape, J, k)``.

        :class:`~kinema.ShapeError` for a batch shape that does not broadcast with the pose's, or whose arrays
        would pass :data:`~kinema._validate.MAX_ALLOCATION_BYTES` (before anything is allocated).
        """
        shape = self.batch_shape if batch_shape is None else broadcast_batch(self.batch_shape,
                                                                             batch_shape_arg(batch_shape))
        n = self.n_joints
        check_allocation(math.prod(shape) * n * POSE_JOINT_BYTES, "pose broadcast batch_shape",
                         f"a batch small enough to allocate ({n} joints, {POSE_JOINT_BYTES} bytes each)", f"{shape}")
        return Pose(
            np.broadcast_to(self._translations, shape + (n, 3)).copy(),
            np.broadcast_to(self._rotations, shape + (n, 4)).copy(),
            np.broadcast_to(self._scales, shape + (n, 3)).copy(),
        )

    def copy(self) -> Pose:
        """A pose of copies of the three arrays (a broadcast view is copied at its full size, refused past
        :data:`~kinema._validate.MAX_ALLOCATION_BYTES`)."""
        t, r, s = self._translations, self._rotations, self._scales
        check_allocation(8 * (t.size + r.size + s.size), "pose copy", "arrays small enough to copy",
                         f"arrays of shapes {t.shape}, {r.shape}, {s.shape}")
        return Pose(t.copy(), r.copy(), s.copy())

    def __getitem__(self, index: Any) -> Pose:
        """Index the batch dimensions as NumPy would (the joint axis is never indexed).

        An index that does not fit the batch dimensions (out of range, however large, more indices than
        batch dimensions, not an index) raises :class:`~kinema.ShapeError`, as does one whose result would pass
        :data:`~kinema._validate.MAX_ALLOCATION_BYTES` (a repeating index array); an integer past the first
        batch dimension raises its subclass :class:`~kinema.BatchIndexError`, also an IndexError, so that
        ``for item in pose`` yields the items of the first batch dimension and stops.
        """
        batch = self.batch_shape
        items = math.prod(batch)
        check_allocation(8 * items, "pose index", "a pose whose batch can be indexed", f"batch shape {batch}")
        try:
            rows = np.arange(items).reshape(batch)[index]  # the batch dims alone
        except (IndexError, TypeError, ValueError, OverflowError) as exc:  # (OverflowError: an int past int64)
            # An integer past the first batch dimension is also an IndexError (Python's iteration protocol
            # stops on it); anything else (no batch dimension, not an index) is a ShapeError only.
            past_end = batch != () and isinstance(index, (int, np.integer)) and not isinstance(index, bool)
            raise (BatchIndexError if past_end else ShapeError)(
                "pose index", f"an index into the batch dimensions {batch}", f"{index!r} ({exc})") from None
        n = self.n_joints
        check_allocation(rows.size * n * POSE_JOINT_BYTES, "pose index", "an index selecting fewer items",
                         f"{rows.size} items of {n} joints")

        def take(a: NDArray[np.float64], k: int) -> NDArray[np.float64]:
            return np.broadcast_to(a, batch + (n, k)).reshape((-1, n, k))[rows]

        return Pose(take(self._translations, 3), take(self._rotations, 4), take(self._scales, 3))

    def __repr__(self) -> str:
        return f"Pose(batch_shape={self.batch_shape}, n_joints={self.n_joints})"


@dataclass
class Clip:
    """An animation: ``pose`` has time as its first batch dimension, sampled at ``fps``.

    ``times`` (optional, ``(frames,)`` seconds, strictly increasing) gives the
    frame times when the frames are not evenly spaced (e.g. glTF key times);
    ``fps`` is then the mean rate ``(frames - 1) / (times[-1] - times[0])``.
    When ``times`` is None, frame ``k`` plays at ``k / fps``.
    """

    pose: Pose
    fps: float
    times: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        fps, times = _clip_fields(self.pose, self.fps, self.times)
        object.__setattr__(self, "fps", fps)
        object.__setattr__(self, "times", times)

    def __setattr__(self, name: str, value: Any) -> None:
        """A field replaced after construction is checked with the others as the constructor checks them
        (``clip.pose = ...`` must be a :class:`Pose` with a time dimension, of ``len(times)`` frames)."""
        if name in _CLIP_FIELDS and "times" in self.__dict__:  # (the dataclass __init__ sets times last)
            fields = {"pose": self.pose, "fps": self.fps, "times": self.times, name: value}
            fps, times = _clip_fields(fields["pose"], fields["fps"], fields["times"])
            object.__setattr__(self, "pose", fields["pose"])
            object.__setattr__(self, "fps", fps)
            object.__setattr__(self, "times", times)
            return
        object.__setattr__(self, name, value)

    @property
    def n_frames(self) -> int:
        batch = self.pose.batch_shape
        if not batch:  # the pose's arrays were all replaced by unbatched ones since
            raise ShapeError("clip pose", "(frames, J, k) with a time dimension", "(J, k)")
        return int(batch[0])

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame (0.0 for a clip of 0 or 1 frames)."""
        if self.n_frames < 2:
            return 0.0
        if self.times is not None:
            return float(self.times[-1] - self.times[0])
        return (self.n_frames - 1) / float(self.fps)

    def __len__(self) -> int:
        return self.n_frames


_CLIP_FIELDS = frozenset({"pose", "fps", "times"})


def _clip_fields(pose: Any, fps: Any, times: Any) -> tuple[float, NDArray[np.float64] | None]:
    """A clip's fields checked together: ``(fps, times)`` as the clip holds them (a float; None or an own float64
    copy).  :class:`SolverInputError` for a pose that is not a :class:`Pose`, an fps that is not a finite number
    > 0 and times that are not finite and strictly increasing; :class:`ShapeError` for a pose without a time
    dimension and times of another length than its frames."""
    if not isinstance(pose, Pose):
        raise SolverInputError(f"clip pose must be a kinema.Pose, got {type(pose).__name__}")
    batch = pose.batch_shape
    if not len(batch):
        raise ShapeError("clip pose", "(frames, J, k) with a time dimension", "(J, k)")
    fps_f = positive_number(fps, "fps")  # SolverInputError (a ValueError) for 0, NaN, "30", True
    if times is None:
        return fps_f, None
    t = np.array(as_float_array(times, "clip times", (int(batch[0]),), batch=False))
    require_finite(t, "clip times")
    if np.any(np.diff(t) <= 0.0):
        raise SolverInputError("clip times must be finite and strictly increasing")
    return fps_f, t


def resample_times(t_start: float, t_end: float, fps: float, max_frames: int) -> NDArray[np.float64]:
    """Evenly spaced frame times ``t_start + k / fps`` for ``k = 0 .. ceil((t_end - t_start) fps - TIME_EPS)``
    (the last at or just past ``t_end``; an end at or before the start gives the one frame at ``t_start``).

    ``t_start`` and ``t_end`` are finite numbers, ``fps`` a finite number > 0 and ``max_frames`` an int >= 0;
    :class:`SolverInputError` for anything else, and when that is more than ``max_frames`` frames, before
    anything is allocated."""
    t0 = as_float_scalar(t_start, "t_start")
    t1 = as_float_scalar(t_end, "t_end")
    if not (math.isfinite(t0) and math.isfinite(t1)):
        raise SolverInputError(f"t_start and t_end must be finite numbers, got {t_start!r} and {t_end!r}")
    rate = positive_number(fps, "fps")
    if (isinstance(max_frames, (bool, np.bool_)) or not isinstance(max_frames, (int, np.integer))
            or max_frames < 0):
        raise SolverInputError(f"max_frames must be an int >= 0, got {max_frames!r}")
    span = (t1 - t0) * rate  # Python floats: an overflow is inf, no warning
    if not span <= max_frames:
        raise SolverInputError(f"resampling {t1 - t0:g} s at {rate:g} fps gives {span:.3g} frames, more "
                               f"than {max_frames}")
    return t0 + np.arange(resampled_frame_count(max(span, 0.0))) / rate


def resampled_frame_count(span: float) -> int:
    """Frames of a resampling over ``span = duration * fps``: ``ceil(span - TIME_EPS) + 1``, at least 1 (a span
    <= 0, an end at or before the start, is the one frame at the start).  :class:`SolverInputError` for a span
    that is not a finite number."""
    v = as_float_scalar(span, "span")
    if not math.isfinite(v):
        raise SolverInputError(f"span must be a finite number, got {span!r}")
    return max(math.ceil(v - TIME_EPS), 0) + 1  # (a Python int: no overflow for a large span)


def key_brackets(times: ArrayLike, query: ArrayLike
                 ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """For each query time the keys around it: ``(i0, i1, u)`` with ``times[i0] <= t <= times[i1]`` and
    ``u = (t - times[i0]) / (times[i1] - times[i0])`` in [0, 1] (``times (K,)`` finite and strictly increasing,
    ``K >= 1``; ``query`` real numbers of any shape, not NaN).

    Before the first key and after the last the end key holds (``i0 == i1``, ``u = 0``), as glTF's samplers.
    :class:`ShapeError` for times that are not ``(K,)`` numbers or a query that is not numbers,
    :class:`SolverInputError` for times not finite or not strictly increasing and a NaN query."""
    t = as_float_array(times, "key times", ())
    if t.ndim != 1 or t.size == 0:
        raise ShapeError("key times", "(K,) with K >= 1", tuple(t.shape))
    require_finite(t, "key times")
    if np.any(t[1:] <= t[:-1]):
        raise SolverInputError("key times must be strictly increasing")
    q = as_float_array(query, "query", ())
    if np.any(np.isnan(q)):  # (inf is a time past every key: the end key holds)
        raise SolverInputError("query contains NaN")
    k = t.shape[0]
    i0 = np.clip(np.searchsorted(t, q, side="right") - 1, 0, k - 1)
    i1 = np.minimum(i0 + 1, k - 1)
    d = t[i1] - t[i0]
    # At or past the last key (and before the first) i0 == i1 or u clips to 0: the end value holds.
    safe_d = np.where(d > 0.0, d, 1.0)
    with np.errstate(over="ignore"):  # a query far before the first key over a tiny first span: -inf, clipped to 0
        u = np.where(d > 0.0, np.clip((q - t[i0]) / safe_d, 0.0, 1.0), 0.0)
    return i0, i1, u
