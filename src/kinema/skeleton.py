"""The skeleton: an immutable set of arrays, parents before children."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import (
    _numeric_array,
    as_float_array,
    batch_shape_arg,
    is_sequence,
    is_unordered,
    not_sequence_text,
    unit_and_length,
)
from .errors import BoneNotFoundError, ShapeError, SkeletonError, SolverInputError

if TYPE_CHECKING:
    from .pose import Pose

__all__ = ["Skeleton"]

from ._kernels.constants import ZERO_QUAT_EPS


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


class Skeleton:
    """A joint hierarchy with its rest pose, stored as arrays.

    Joints are in depth-first order: ``parents[j] < j`` for every non-root
    joint and ``parents[j] == -1`` for roots.

    Attributes (all read-only arrays):

    * ``names``: tuple of ``J`` unique, non-empty joint names.
    * ``parents``: ``(J,)`` int64, parent index or -1.
    * ``translations``: ``(J, 3)`` rest local translation (parent space, file units).
    * ``rotations``: ``(J, 4)`` rest local rotation, unit quaternion **xyzw**.
    * ``scales``: ``(J, 3)`` rest local scale, all components > 0.
    * ``meta``: read-only mapping of format-specific data (BVH channels,
      glTF inverse bind matrices, ...); kinema's solvers never read it.

    A skeleton in another order is rejected; :meth:`from_unordered` reorders
    it and returns the mapping.
    """

    __slots__ = ("_names", "_parents", "_translations", "_rotations", "_scales", "_meta", "_index", "_children",
                 "_fk_topology")

    def __init__(
        self,
        names: Sequence[str],
        parents: ArrayLike,
        translations: ArrayLike,
        rotations: ArrayLike | None = None,
        scales: ArrayLike | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        names_t, seen = _names(names)
        n = len(names_t)
        if n == 0:
            raise SkeletonError("a skeleton needs at least one joint")

        par_in = _numeric_array(parents, "parents", f"({n},)")  # not names (from_unordered takes those), not bools
        if par_in.shape != (n,):
            raise ShapeError("parents", f"({n},)", tuple(par_in.shape))
        if not np.all(np.mod(par_in, 1) == 0):  # NaN and inf too
            raise SkeletonError("parents must be integer indices")
        out_of_range = np.nonzero((par_in < -1) | (par_in >= n))[0]  # before the cast: 2**64 - 1 is not -1
        if out_of_range.size:
            j = int(out_of_range[0])
            raise SkeletonError(f"joint {names_t[j]!r} has unknown parent index {par_in[j]} (skeleton has {n} joints)")
        par = par_in.astype(np.int64)
        for j in range(n):
            p = int(par[j])
            if p == -1:
                continue
            if p == j:
                raise SkeletonError(f"joint {names_t[j]!r} is its own parent (a cycle)")
            if p > j:
                raise SkeletonError(
                    f"joint {names_t[j]!r} (index {j}) comes before its parent {names_t[p]!r} (index {p}): "
                    "joints must be in depth-first order (parents first); "
                    "use Skeleton.from_unordered(...) to reorder and get the mapping"
                )

        t = _checked(translations, (n, 3), "translations", names_t)
        if rotations is None:
            r = np.zeros((n, 4))
            r[:, 3] = 1.0
        else:
            r, norms = unit_and_length(_checked(rotations, (n, 4), "rotations", names_t))  # any finite size
            bad = np.nonzero(norms[:, 0] < ZERO_QUAT_EPS)[0]
            if bad.size:
                raise SkeletonError(f"joint {names_t[int(bad[0])]!r} has a zero rotation quaternion")
        if scales is None:
            s = np.ones((n, 3))
        else:
            s = _checked(scales, (n, 3), "scales", names_t)
            bad = np.nonzero(np.any(s <= 0.0, axis=1))[0]
            if bad.size:
                j = int(bad[0])
                raise SkeletonError(f"joint {names_t[j]!r} has a zero or negative scale {tuple(s[j])}")

        self._names = names_t
        self._parents = _readonly(par)
        self._translations = _readonly(t)
        self._rotations = _readonly(r)
        self._scales = _readonly(s)
        if meta is not None and not isinstance(meta, Mapping):
            raise SkeletonError(f"meta must be a mapping (a dict), got {type(meta).__name__}")
        self._meta: Mapping[str, Any] = MappingProxyType(dict(meta or {}))
        self._index = seen
        kids: list[list[int]] = [[] for _ in range(n)]
        for j in range(n):
            if par[j] >= 0:
                kids[int(par[j])].append(j)
        self._children = tuple(tuple(k) for k in kids)
        # Forward kinematics' topology: the parents, then the joints without children (where it looks for NaN and
        # inf; see kinema._kernels.fk).
        self._fk_topology = _readonly(np.concatenate([par, np.array([j for j in range(n) if not kids[j]],
                                                                    dtype=np.int64)]))

    # ------------------------------------------------------------------ build
    @classmethod
    def from_unordered(
        cls,
        names: Sequence[str],
        parents: Sequence[int | str | None] | ArrayLike,
        translations: ArrayLike,
        rotations: ArrayLike | None = None,
        scales: ArrayLike | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> tuple[Skeleton, NDArray[np.int64]]:
        """Build a skeleton from joints in any order.

        ``parents`` holds, per joint, a parent index into the given order, a
        parent name, or ``None``/-1 for a root.  Returns ``(skeleton, order)``
        where ``order[new_index] == old_index``; reorder per-joint data with
        ``data[order]``.  Children keep their relative order; roots come in
        the order given.
        """
        names_t, pos = _names(names)  # strings, each once: a name used twice is reported as such, not as a cycle
        n = len(names_t)
        if not is_sequence(parents):
            why = " (its order is arbitrary: give a list or a tuple)" if is_unordered(parents) else ""
            raise SkeletonError(f"parents must be a sequence (a parent per joint, in the order of the names), got "
                                f"{type(parents).__name__}{why}")
        plist: list[Any] = list(parents) if not isinstance(parents, np.ndarray) else parents.tolist()  # type: ignore[arg-type]
        if len(plist) != n:
            raise ShapeError("parents", f"({n},)", (len(plist),))
        par_idx: list[int] = []
        for j, p in enumerate(plist):
            if p is None:
                par_idx.append(-1)
            elif isinstance(p, str):
                if p not in pos:
                    raise SkeletonError(f"joint {names_t[j]!r} has unknown parent {p!r}")
                par_idx.append(pos[p])
            else:
                integral = isinstance(p, (int, np.integer)) or (isinstance(p, (float, np.floating)) and p % 1 == 0)
                if isinstance(p, (bool, np.bool_)) or not integral:  # 1.5 is no index; NaN neither
                    raise SkeletonError(f"joint {names_t[j]!r} has parent {p!r}: a parent is an index, a name or None")
                pi = int(p)
                if pi < -1 or pi >= n:
                    raise SkeletonError(f"joint {names_t[j]!r} has unknown parent index {pi}")
                par_idx.append(pi)
        kids: list[list[int]] = [[] for _ in range(n)]
        roots = []
        for j, p in enumerate(par_idx):
            if p == -1:
                roots.append(j)
            else:
                kids[p].append(j)
        order: list[int] = []
        stack = list(reversed(roots))
        while stack:
            j = stack.pop()
            order.append(j)
            stack.extend(reversed(kids[j]))
        if len(order) != n:
            reached = set(order)
            bad = next(j for j in range(n) if j not in reached)
            raise SkeletonError(f"joint {names_t[bad]!r} is part of a parent cycle (it never reaches a root)")
        order_a = np.asarray(order, dtype=np.int64)
        new_of_old = np.empty(n, dtype=np.int64)
        new_of_old[order_a] = np.arange(n)
        new_parents = np.array([-1 if par_idx[o] == -1 else new_of_old[par_idx[o]] for o in order], dtype=np.int64)

        def take(a: ArrayLike | None, what: str, k: int) -> NDArray[Any] | None:
            return None if a is None else as_float_array(a, what, (n, k), batch=False)[order_a]

        t = as_float_array(translations, "translations", (n, 3), batch=False)[order_a]
        skel = cls([names_t[o] for o in order], new_parents, t, take(rotations, "rotations", 4),
                   take(scales, "scales", 3), meta=meta)
        return skel, order_a

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and copy by the constructor's arguments: a skeleton goes to worker processes
        (multiprocessing, Dask) and through :func:`copy.deepcopy` like any value (its read-only meta
        mapping could not be pickled)."""
        return (_skeleton_from, (self._names, self._parents, self._translations, self._rotations, self._scales,
                                 dict(self._meta)))

    # ------------------------------------------------------------- properties
    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def parents(self) -> NDArray[np.int64]:
        return self._parents

    @property
    def translations(self) -> NDArray[np.float64]:
        return self._translations

    @property
    def rotations(self) -> NDArray[np.float64]:
        return self._rotations

    @property
    def scales(self) -> NDArray[np.float64]:
        return self._scales

    @property
    def meta(self) -> Mapping[str, Any]:
        return self._meta

    @property
    def n_joints(self) -> int:
        return len(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        roots = [self._names[j] for j in range(len(self._names)) if self._parents[j] == -1]
        return f"Skeleton({len(self._names)} joints, roots={roots})"

    # ----------------------------------------------------------------- lookup
    def index(self, name: str) -> int:
        """Index of joint ``name``; :class:`BoneNotFoundError` listing the closest names."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise BoneNotFoundError(name, self._names) from None

    def indices(self, joints: Iterable[int | str]) -> NDArray[np.int64]:
        """Indices of several joints given by name or index (a sequence of them; one name is not)."""
        from ._validate import resolve_joint

        if not is_sequence(joints):  # (the error every bad ``joints`` of indices raises, a set's too)
            got = not_sequence_text(joints) if is_unordered(joints) else f"{joints!r}; index() takes one name"
            raise BoneNotFoundError(joints, self._names, f"indices takes a sequence of joint names or indices, got "
                                    f"{got}")
        return np.asarray([resolve_joint(self, j) for j in joints], dtype=np.int64)

    def children(self, joint: int | str) -> tuple[int, ...]:
        """Indices of the direct children of ``joint``."""
        from ._validate import resolve_joint

        return self._children[resolve_joint(self, joint)]

    def ancestors(self, joint: int | str) -> tuple[int, ...]:
        """Indices from ``joint``'s parent up to its root."""
        from ._validate import resolve_joint

        out = []
        p = int(self._parents[resolve_joint(self, joint)])
        while p != -1:
            out.append(p)
            p = int(self._parents[p])
        return tuple(out)

    def chain(self, start: int | str, end: int | str) -> NDArray[np.int64]:
        """Joint indices from ``start`` down to ``end`` (both included).

        Raises :class:`SkeletonError` when ``end`` is not ``start`` or below it.
        """
        from ._validate import resolve_joint

        s = resolve_joint(self, start)
        e = resolve_joint(self, end)
        path = [e]
        j = e
        while j != s:
            j = int(self._parents[j])
            if j == -1:
                raise SkeletonError(
                    f"joint {self._names[e]!r} is not below {self._names[s]!r}: no chain from one to the other"
                )
            path.append(j)
        return np.asarray(path[::-1], dtype=np.int64)

    # ------------------------------------------------------------------ poses
    @property
    def has_uniform_scale(self) -> bool:
        """True when every rest scale is exactly uniform (sx == sy == sz; float32 noise such as 1.000000119
        counts as non-uniform here, though the solvers accept it, see :func:`kinema._validate.uniform_scale`)."""
        from ._validate import uniform_scale

        return bool(np.all(uniform_scale(self._scales, rtol=0.0)))

    def rest_pose(self, batch_shape: tuple[int, ...] = ()) -> Pose:
        """The rest pose as a :class:`~kinema.Pose` (copies, broadcast to ``batch_shape``).

        :class:`~kinema.ShapeError` for a batch shape that is not one, or whose arrays would pass
        :data:`~kinema._validate.MAX_ALLOCATION_BYTES` (before anything is allocated).
        """
        from .pose import POSE_JOINT_BYTES, Pose

        shape = batch_shape_arg(batch_shape, item_bytes=self.n_joints * POSE_JOINT_BYTES)  # refused past the limit
        return Pose(
            np.broadcast_to(self._translations, shape + self._translations.shape).copy(),
            np.broadcast_to(self._rotations, shape + self._rotations.shape).copy(),
            np.broadcast_to(self._scales, shape + self._scales.shape).copy(),
        )

    def bone_lengths(self, pose: Pose | None = None) -> NDArray[np.float64]:
        """World-space distance of each joint from its parent, ``(*batch, J)``; 0 for roots.

        Uses the rest pose when ``pose`` is None.
        """
        from .fk import forward_kinematics

        fk = forward_kinematics(self, self.rest_pose() if pose is None else pose)
        p = fk.positions
        par = self._parents
        out = np.zeros(p.shape[:-1])
        has = par >= 0
        out[..., has] = np.linalg.norm(p[..., has, :] - p[..., par[has], :], axis=-1)
        return out


def check_skeleton(skeleton: Any, what: str = "") -> Skeleton:
    """``skeleton`` itself when it is a :class:`Skeleton`; :class:`~kinema.SolverInputError` naming the type given
    otherwise (``what``: the function or class, put before the message)."""
    if not isinstance(skeleton, Skeleton):
        prefix = f"{what}: " if what else ""
        raise SolverInputError(f"{prefix}skeleton must be a kinema.Skeleton, got {type(skeleton).__name__}")
    return skeleton


def _names(names: Any) -> tuple[tuple[str, ...], dict[str, int]]:
    """The joint names as a tuple, and each name's index.

    :class:`SkeletonError` for a string (its letters are not names), a non-sequence, a set (its order is
    arbitrary, so which joint is which would be too), an empty or non-string name and a name used twice.
    """
    if is_unordered(names):  # (a dict's keys keep their order: they are a sequence here)
        raise SkeletonError(f"names must be an ordered sequence of joint names (a list or a tuple), got a "
                            f"{type(names).__name__}, whose order is arbitrary")
    if not is_sequence(names):
        raise SkeletonError(f"names must be a sequence of joint names, got {names!r}")
    names_t = tuple(names)
    seen: dict[str, int] = {}
    for j, name in enumerate(names_t):
        if not isinstance(name, str) or not name:
            raise SkeletonError(f"joint {j} has an empty or non-string name: {name!r}")
        if name in seen:
            raise SkeletonError(f"joint name {name!r} is used twice (joints {seen[name]} and {j})")
        seen[name] = j
    return names_t, seen


def _checked(a: ArrayLike, shape: tuple[int, ...], what: str, names: tuple[str, ...]) -> NDArray[np.float64]:
    """``a`` as a float64 array of exactly ``shape`` (:func:`~kinema._validate.as_float_array`: real numbers, read
    as the numbers they hold), finite (:class:`SkeletonError` naming the joint)."""
    arr = np.array(as_float_array(a, what, shape, batch=False))  # an own copy (it is made read-only)
    bad = np.nonzero(~np.all(np.isfinite(arr), axis=1))[0]
    if bad.size:
        raise SkeletonError(f"joint {names[int(bad[0])]!r} has NaN or inf in its rest {what}")
    return arr


def _skeleton_from(names: Sequence[str], parents: ArrayLike, translations: ArrayLike, rotations: ArrayLike,
                   scales: ArrayLike, meta: Mapping[str, Any]) -> Skeleton:
    """:meth:`Skeleton.__reduce__`'s rebuild (the constructor takes ``meta`` by keyword only)."""
    return Skeleton(names, parents, translations, rotations, scales, meta=meta)
