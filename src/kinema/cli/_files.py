"""Reading and writing motion files for the command line (BVH, glTF/GLB, bundled samples).

Safety rules, shared by every command and the batch engine:

* an output is written atomically (the writers go through
  :func:`kinema.io._atomic.atomic_write`: temporary file in the output's
  folder, renamed when complete), so Ctrl-C or a crash leaves no partial file;
* an output that is one of the inputs is refused, even with ``--force``;
* an existing output is refused unless ``--force`` (a symlink counts as
  existing, even one that points nowhere: it is never written through
  without ``--force``);
* a missing output folder is created when the output is written (and
  removed again if the write fails), so ``-o out/x.bvh`` works in a fresh
  clone.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io._atomic import same_file
from ..io._bvh import evenly_spaced
from ..io._read import file_kind
from ..pose import Clip, Pose
from ..skeleton import Skeleton

if TYPE_CHECKING:
    from ..io.gltf.reader import ExternalFiles
    from ..mesh import SkinnedMesh

__all__ = ["CliError", "Interrupted", "Motion", "FORMATS", "format_of", "load_motion", "load_sample", "check_output",
           "check_folder_of", "save_motion", "scaled", "scaled_mesh", "unit_scales", "make_folders",
           "remove_empty_folders"]

#: File extensions the command line reads and writes, and their format.
FORMATS = {".bvh": "bvh", ".gltf": "gltf", ".glb": "gltf"}

#: Frame rate of a glTF file without animation (its rest pose as one frame).
DEFAULT_RESAMPLE_FPS = 30.0

#: BVH has no scale.  Scales within this of 1 (float32 rounding in glTF files,
#: e.g. 1.0000001) are written as exactly 1; larger ones are an error.
UNIT_SCALE_SNAP = 1e-5


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


class UsageError(CliError):
    """A bad command line found after parsing (arguments or option values the command does not take): printed as
    one line, exit status 2, as argparse's own usage errors."""


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal (SIGTERM; Ctrl-C is a plain KeyboardInterrupt).

    A ``KeyboardInterrupt``, so every cleanup that handles Ctrl-C handles it
    too; the exit status is ``128 + signum``.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


@dataclass
class Motion:
    """A skeleton and one clip, with where they came from."""

    skeleton: Skeleton
    clip: Clip
    source: str
    kind: str  # "bvh", "gltf" or "sample"
    clip_name: str = "clip"
    clip_names: tuple[str, ...] = field(default_factory=tuple)
    #: The skinned mesh a glTF file brought (``kinema.mesh.SkinnedMesh``), passed to ``save_gltf`` explicitly.
    mesh: Any = None


def format_of(path: str) -> str:
    """The format of ``path`` by its extension; :class:`CliError` for another extension (or a folder without one:
    said so, as a folder named ``d.bvh`` is when it is read)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        if os.path.isdir(path):
            raise CliError(f"{path}: is a folder, not a file")
        raise CliError(f"{path}: unknown file type {ext or '(no extension)'!r}; use .bvh, .gltf or .glb")
    return FORMATS[ext]


def _resample_bvh(path: str, skeleton: Skeleton, clip: Clip, fps: float) -> Clip:
    """A BVH file's clip resampled at ``fps``; :class:`CliError` when its poses would need more memory than the
    file may decode (the readers' budget: ``DECODE_BUDGET_FLOOR`` plus ``DECODE_BUDGET_FACTOR`` per file byte),
    before anything is allocated."""
    from ..io.gltf.reader import DECODE_BUDGET_FACTOR, DECODE_BUDGET_FLOOR
    from ..mocap import resample

    span = clip.duration * fps  # Python floats: an overflow is inf
    need = (span + 2.0) * skeleton.n_joints * 10 * 8 * 2  # the new clip's pose arrays, and slerp's inputs
    budget = DECODE_BUDGET_FLOOR + DECODE_BUDGET_FACTOR * os.path.getsize(path)
    if not need <= budget:
        raise CliError(f"{path}: resampling {clip.duration:.6g} s at {fps:.6g} fps needs {need:.3g} bytes of pose "
                       f"arrays, more than this file may decode ({budget:,} bytes)")
    return resample(clip, fps)


def load_motion(path: str, *, clip_name: str | None = None, fps: float | None = None,
                even_frames: bool = False, external: ExternalFiles | None = None) -> Motion:
    """Read a BVH or glTF/GLB file.

    ``clip_name`` picks a glTF animation (default the first); a BVH file's one motion is named after the file
    (another ``clip_name`` is a :class:`CliError`).  ``fps`` resamples the motion (a BVH file's with
    :func:`kinema.mocap.resample`, within the file's decode budget).  glTF: ``even_frames`` resamples at
    :data:`DEFAULT_RESAMPLE_FPS` when the key times are uneven (needed to write BVH).  A glTF file without
    animation gives a one-frame clip of its rest pose.  ``external``: its external buffers, read in its own
    folder (a copy of the file loaded by a Dask worker; see :func:`kinema.io.load_gltf`).
    """
    kind = format_of(path)
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a folder, not a file")
    if kind == "bvh":
        from ..io import load_bvh

        # A BVH file holds one motion, named after the file (as its glTF output's animation is): ``--clip`` names
        # it or is refused like a glTF file's missing animation (it was silently ignored).
        stem = os.path.splitext(os.path.basename(path))[0]
        if clip_name is not None and clip_name != stem:
            raise CliError(f"{path}: no animation named {clip_name!r}; a BVH file holds one, {stem!r} (named "
                           "after the file)")
        skeleton, clip = load_bvh(path)
        if fps is not None:
            clip = _resample_bvh(path, skeleton, clip, fps)
        return Motion(skeleton, clip, path, "bvh", stem)
    try:
        from ..io import load_gltf
    except ImportError as e:  # pygltflib is an extra
        raise CliError(f"reading glTF needs pygltflib: pip install 'kinema[io]' ({e})") from None
    asset = load_gltf(path, fps=fps, external=external)
    names = tuple(asset.clips)
    if clip_name is not None:
        if clip_name not in asset.clips:
            raise CliError(f"{path}: no animation named {clip_name!r}; it has: {', '.join(names) or 'none'}")
        name = clip_name
    elif names:
        name = names[0]
    else:
        rest = asset.skeleton.rest_pose((1,))
        return Motion(asset.skeleton, Clip(rest, fps or DEFAULT_RESAMPLE_FPS), path, "gltf", "rest", names,
                      asset.mesh)
    clip = asset.clips[name]
    # glTF key times are float32: times even as far as stored times can tell (the BVH writer's own test,
    # kinema.io._bvh.evenly_spaced) are written as BVH frames at their mean rate as they are; unevenly keyed
    # clips are resampled at their mean rate instead.
    if even_frames and fps is None and clip.times is not None:
        if not evenly_spaced(clip.times):
            return load_motion(path, clip_name=name, fps=float(clip.fps), external=external)
        clip = Clip(clip.pose, float(clip.fps))  # float32 rounding only: same frames, even spacing
    return Motion(asset.skeleton, clip, path, "gltf", name, names, asset.mesh)


def load_sample(name: str) -> Motion:
    """A bundled sample clip on the DeepMimic humanoid (``walk`` or ``run``)."""
    from .. import samples

    if name not in samples.CLIP_NAMES:
        raise UsageError(f"unknown sample {name!r}; choose one of: {', '.join(samples.CLIP_NAMES)}")
    return Motion(samples.humanoid(), samples.clip(name), f"sample:{name}", "sample", name)


def check_output(out: str, inputs: list[str], force: bool) -> None:
    """Refuse an output that is an input (always) or exists (unless ``force``; a dangling symlink exists).

    The output's folder may be missing (:func:`save_motion` creates it), but
    its nearest existing ancestor must be a folder.  An output type kinema does not write is a bad command line
    (:class:`UsageError`, exit status 2).
    """
    if os.path.isdir(out) and os.path.splitext(out)[1].lower() not in FORMATS:
        raise CliError(f"{out}: is a folder; give a file name")  # as a folder named d.bvh is, below
    try:
        format_of(out)
    except CliError as e:
        raise UsageError(str(e)) from None
    for src in inputs:
        if os.path.exists(src) and same_file(out, src):
            raise CliError(f"{out}: refusing to overwrite the input file")
    if os.path.isdir(out):
        raise CliError(f"{out}: is a folder; give a file name")
    if os.path.lexists(out) and not force:
        if os.path.islink(out):
            what = "a symlink to " + os.readlink(out)
        else:
            mode = os.stat(out).st_mode
            what = "a file" if stat.S_ISREG(mode) else file_kind(mode)  # "a FIFO", "a character device", ...
        raise CliError(f"{out}: already exists ({what}); pass --force to replace it")
    check_folder_of(out)


def check_folder_of(out: str) -> None:
    """:class:`CliError` unless ``out``'s folder exists or can be made (:func:`make_folders`): its nearest existing
    ancestor must be a folder."""
    folder = _nearest_existing(os.path.dirname(os.path.abspath(out)))
    if not os.path.isdir(folder):
        raise CliError(f"{out}: {folder} is not a folder")


def _nearest_existing(folder: str) -> str:
    while not os.path.lexists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def make_folders(folder: str) -> list[str]:
    """Create ``folder`` and its missing ancestors; returns those created, deepest first."""
    created: list[str] = []
    folder = os.path.abspath(folder)
    while not os.path.lexists(folder):
        created.append(folder)
        folder = os.path.dirname(folder)
    for f in reversed(created):
        os.mkdir(f)
    return created


def remove_empty_folders(created: list[str]) -> None:
    """Remove the folders :func:`make_folders` created, deepest first, as long as they are empty."""
    for f in created:
        try:
            os.rmdir(f)
        except OSError:  # not empty (or gone): keep it and everything above it
            return


#: Decimals of the BVH files the commands write at their own size (``save_bvh``'s default).
BVH_DECIMALS = 6


def bvh_precision(scale: float) -> int:
    """Decimals for a BVH written at ``scale`` times its input's size: the input's resolution at
    :data:`BVH_DECIMALS` decimals, kept (``--scale 0.01``, centimetres to metres, writes 8), at most 17."""
    if not 0.0 < scale < 1.0:
        return BVH_DECIMALS
    return min(17, BVH_DECIMALS + math.ceil(-math.log10(scale) - 1e-9))


def save_motion(out: str, skeleton: Skeleton, clip: Clip, *, name: str = "clip", mesh: str | None = None,
                inputs: list[str] | None = None, force: bool = True, loaded_mesh: Any = None,
                scale: float = 1.0) -> None:
    """Write ``clip`` as BVH or glTF/GLB (by extension), atomically.

    ``scale``: the factor the motion was scaled by (``convert --scale``): a BVH keeps the input's resolution
    (:func:`bvh_precision`).

    ``mesh`` (glTF only): ``"keep"`` the mesh the input was loaded with
    (``loaded_mesh``, :attr:`Motion.mesh`, handed to ``save_gltf``),
    ``"bones"`` capsules along the bones, ``"none"``; default keep when there
    is one, else bones (so the file opens in any glTF viewer).
    """
    check_output(out, inputs or [], force)
    kind = format_of(out)
    created = make_folders(os.path.dirname(os.path.abspath(out)))
    try:
        if kind == "bvh":
            from ..io import save_bvh

            skeleton, clip = unit_scales(skeleton, clip)
            save_bvh(out, skeleton, clip, precision=bvh_precision(scale))
            return
        try:
            from ..io import save_gltf
        except ImportError as e:
            raise CliError(f"writing glTF needs pygltflib: pip install 'kinema[io]' ({e})") from None
        has_mesh = loaded_mesh is not None
        choice = mesh or ("keep" if has_mesh else "bones")
        mesh_arg: object = {"keep": loaded_mesh if has_mesh else False, "bones": "bones", "none": False}[choice]
        save_gltf(out, skeleton, {name: clip}, mesh=mesh_arg)  # type: ignore[arg-type]
    except BaseException:
        remove_empty_folders(created)
        raise


def unit_scales(skeleton: Skeleton, clip: Clip) -> tuple[Skeleton, Clip]:
    """Snap scales within :data:`UNIT_SCALE_SNAP` of 1 to exactly 1 (for BVH); others are left for the writer."""
    s0, s1 = skeleton.scales, clip.pose.scales
    near0 = np.all(np.abs(s0 - 1.0) <= UNIT_SCALE_SNAP)
    near1 = np.all(np.abs(s1 - 1.0) <= UNIT_SCALE_SNAP)
    if not (near0 and near1) or (np.all(s0 == 1.0) and np.all(s1 == 1.0)):
        return skeleton, clip
    sk = Skeleton(skeleton.names, skeleton.parents, skeleton.translations, skeleton.rotations, None,
                  meta=skeleton.meta)
    return sk, Clip(Pose(clip.pose.translations, clip.pose.rotations), clip.fps, clip.times)


def scaled(skeleton: Skeleton, clip: Clip, factor: float) -> tuple[Skeleton, Clip]:
    """Skeleton and clip with every length multiplied by ``factor`` (e.g. 0.01: centimetres to metres)."""
    if factor == 1.0:
        return skeleton, clip
    # The BVH layout and the source format (a glTF's float32 tolerance in save_bvh) still hold; lengths recorded
    # elsewhere in meta would not.
    sk = Skeleton(skeleton.names, skeleton.parents, skeleton.translations * factor, skeleton.rotations,
                  skeleton.scales,
                  meta={k: v for k, v in skeleton.meta.items() if k.startswith("bvh_") or k == "format"})
    pose = Pose(clip.pose.translations * factor, clip.pose.rotations, clip.pose.scales)
    return sk, Clip(pose, clip.fps, clip.times)


def scaled_mesh(mesh: SkinnedMesh | None, factor: float) -> SkinnedMesh | None:
    """A loaded skinned mesh (``kinema.mesh.SkinnedMesh``, or None) scaled as :func:`scaled` scales its skeleton.

    Scaling the scene by ``S = diag(f, f, f, 1)`` maps each joint's world transform ``T`` to ``S T S^-1`` and
    each vertex ``v`` to ``S v``, so an inverse bind matrix becomes ``S IBM S^-1``: its linear part is unchanged
    and its translation is multiplied by ``f``; normals, weights and triangles are unchanged.  Every skinned
    vertex is then ``f`` times the original one in every pose (the mesh was written at its original size, so
    ``convert --scale`` distorted the character).
    """
    if mesh is None or factor == 1.0:
        return mesh
    ibm = np.array(mesh.inverse_bind_matrices, dtype=np.float64)
    ibm[:, :3, 3] *= factor
    return replace(mesh, positions=np.asarray(mesh.positions, dtype=np.float64) * factor, inverse_bind_matrices=ibm)
