"""Motion and character files: BVH and glTF/GLB in and out.

* :func:`load_bvh` / :func:`save_bvh`: BVH motion capture (``kinema.io._bvh``).
* :func:`load_gltf` / :func:`save_gltf`: glTF 2.0 and GLB (the ``kinema.io.gltf``
  package; reading is plain Python, writing needs the ``io`` extra's pygltflib,
  which is imported only inside :func:`save_gltf`).  :class:`GltfAsset` is what
  :func:`load_gltf` returns, :class:`GltfMesh` its skinned mesh (the class
  :class:`kinema.mesh.SkinnedMesh`), and :func:`bone_mesh` makes a capsule skin
  for skeleton-only data.

Every writer goes through :func:`kinema.io._atomic.atomic_write`: output is
written to a temporary file and renamed, and an input is never overwritten.
Bad files raise :class:`kinema.FileFormatError` with the file and line (or JSON
path).
"""

from __future__ import annotations

from ._bvh import load_bvh, save_bvh
from .gltf import GltfAsset, GltfMesh, bone_mesh, load_gltf, save_gltf

__all__ = ["load_bvh", "save_bvh", "load_gltf", "save_gltf", "GltfAsset", "GltfMesh", "bone_mesh"]
