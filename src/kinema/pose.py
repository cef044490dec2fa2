"""Poses (local joint transforms with batch dimensions) and clips (poses over time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import as_float_array, batch_shape_arg, broadcast_batch, positive_number, require_finite
from .errors import ShapeError, SolverInputError

__all__ = ["Pose", "Clip", "TIME_EPS", "resample_times", "resampled_frame_count", "key_brackets"]

#: Slack when counting resampled frames: ``ceil(t_end * fps - TIME_EPS)``, so
#: an end time on the grid up to float round-off does not add a frame.
TIME_EPS = 1e-9


class Pose:
    """Local joint transforms, batch-first.

    * ``translations``: ``(*batch, J, 3)`` local translation in the parent's space.
    * ``rotations``: ``(*batch, J, 4)`` local rotation, unit quaternion **xyzw**.
    * ``scales``: ``(*batch, J, 3)`` local scale (ones when omitted).

    The three arrays' batch dimensions only need to broadcast against each
    other (a clip may animate rotations per frame and share one set of
    translations).  The arrays are held, not copied: solvers return new
    poses, or write into a caller-owned pose passed as ``out=``.
    """

    __slots__ = ("translations", "rotations", "scales")

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
        if scales is None:
            s = np.ones((n, 3))
        else:
            s = as_float_array(scales, "pose scales", (3,))
            if s.ndim < 2 or s.shape[-2] != n:
                raise ShapeError("pose scales", f"(..., {n}, 3)", tuple(s.shape))
        broadcast_batch(t.shape[:-2], r.shape[:-2], s.shape[:-2])
        self.translations: NDArray[np.float64] = t
        self.rotations: NDArray[np.float64] = r
        self.scales: NDArray[np.float64] = s

    @classmethod
    def _trusted(cls, translations: NDArray[np.float64], rotations: NDArray[np.float64],
                 scales: NDArray[np.float64]) -> Pose:
        """A pose around float64 arrays already known to be valid (solvers' hot path: no re-validation)."""
        p = cls.__new__(cls)
        p.translations = translations
        p.rotations = rotations
        p.scales = scales
        return p

    @property
    def n_joints(self) -> int:
        return int(self.translations.shape[-2])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return broadcast_batch(self.translations.shape[:-2], self.rotations.shape[:-2], self.scales.shape[:-2])

    def broadcast(self, batch_shape: tuple[int, ...] | None = None) -> Pose:
        """A copy whose three arrays all have the full shape ``(*batch_shape, J, k)``."""
        shape = self.batch_shape if batch_shape is None else broadcast_batch(self.batch_shape,
                                                                             batch_shape_arg(batch_shape))
        n = self.n_joints
        return Pose(
            np.broadcast_to(self.translations, shape + (n, 3)).copy(),
            np.broadcast_to(self.rotations, shape + (n, 4)).copy(),
            np.broadcast_to(self.scales, shape + (n, 3)).copy(),
        )

    def copy(self) -> Pose:
        return Pose(self.translations.copy(), self.rotations.copy(), self.scales.copy())

    def __getitem__(self, index: Any) -> Pose:
        """Index the batch dimensions as NumPy would (the joint axis is never indexed).

        An index that does not fit the batch dimensions (out of range, more indices than batch
        dimensions, not an index) raises :class:`~kinema.ShapeError`.
        """
        batch = self.batch_shape
        try:
            rows = np.arange(int(np.prod(batch)) if batch else 1).reshape(batch)[index]  # the batch dims alone
        except (IndexError, TypeError, ValueError) as exc:
            raise ShapeError("pose index", f"an index into the batch dimensions {batch}",
                             f"{index!r} ({exc})") from None
        n = self.n_joints

        def take(a: NDArray[np.float64], k: int) -> NDArray[np.float64]:
            return np.broadcast_to(a, batch + (n, k)).reshape((-1, n, k))[rows]

        return Pose(take(self.translations, 3), take(self.rotations, 4), take(self.scales, 3))

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
        if not isinstance(self.pose, Pose):
            raise SolverInputError(f"clip pose must be a kinema.Pose, got {type(self.pose).__name__}")
        if not len(self.pose.batch_shape):
            raise ShapeError("clip pose", "(frames, J, k) with a time dimension", "(J, k)")
        self.fps = positive_number(self.fps, "fps")  # SolverInputError (a ValueError) for 0, NaN, "30", True
        if self.times is not None:
            t = np.array(as_float_array(self.times, "clip times", (self.n_frames,), batch=False))
            require_finite(t, "clip times")
            if np.any(np.diff(t) <= 0.0):
                raise SolverInputError("clip times must be finite and strictly increasing")
            self.times = t

    @property
    def n_frames(self) -> int:
        return int(self.pose.batch_shape[0])

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


def resample_times(t_start: float, t_end: float, fps: float, max_frames: int) -> NDArray[np.float64]:
    """Evenly spaced frame times ``t_start + k / fps`` for ``k = 0 .. ceil((t_end - t_start) fps - TIME_EPS)``
    (the last at or just past ``t_end``).  :class:`SolverInputError` when that is more than ``max_frames``
    frames, before anything is allocated."""
    span = (float(t_end) - float(t_start)) * float(fps)  # Python floats: an overflow is inf, no warning
    if not span <= max_frames:
        raise SolverInputError(f"resampling {t_end - t_start:g} s at {fps:g} fps gives {span:.3g} frames, more "
                               f"than {max_frames}")
    return float(t_start) + np.arange(resampled_frame_count(span)) / float(fps)


def resampled_frame_count(span: float) -> int:
    """Frames of a resampling over ``span = duration * fps`` (finite, >= 0): ``ceil(span - TIME_EPS) + 1``."""
    return max(int(np.ceil(span - TIME_EPS)), 0) + 1


def key_brackets(times: NDArray[np.float64], query: NDArray[np.float64]
                 ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """For each query time the keys around it: ``(i0, i1, u)`` with ``times[i0] <= t <= times[i1]`` and
    ``u = (t - times[i0]) / (times[i1] - times[i0])`` in [0, 1] (``times (K,)`` strictly increasing).

    Before the first key and after the last the end key holds (``i0 == i1``, ``u = 0``), as glTF's samplers."""
    k = times.shape[0]
    i0 = np.clip(np.searchsorted(times, query, side="right") - 1, 0, k - 1)
    i1 = np.minimum(i0 + 1, k - 1)
    d = times[i1] - times[i0]
    # At or past the last key (and before the first) i0 == i1 or u clips to 0: the end value holds.
    safe_d = np.where(d > 0.0, d, 1.0)
    u = np.where(d > 0.0, np.clip((query - times[i0]) / safe_d, 0.0, 1.0), 0.0)
    return i0, i1, u
