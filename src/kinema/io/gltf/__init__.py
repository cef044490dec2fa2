"""glTF 2.0 (``.gltf``) and GLB (``.glb``) in and out.

* :mod:`~kinema.io.gltf.reader`: the checked reader and the GLB / ``.gltf`` container;
* :mod:`~kinema.io.gltf.scene`: node transforms and hierarchy folding;
* :mod:`~kinema.io.gltf.load`: :func:`load_gltf` (skeleton, mesh, animations, keyframe resampling);
* :mod:`~kinema.io.gltf.save`: :func:`save_gltf`;
* :mod:`~kinema.io.gltf.bvh_layout`: a BVH skeleton's End Sites and channels kept in node ``extras``.

The skinned mesh itself (:class:`kinema.mesh.SkinnedMesh`, here also named
``GltfMesh``) and :func:`~kinema.mesh.bone_mesh` live in :mod:`kinema.mesh`,
shared with the viewer.
"""

from __future__ import annotations

from ...mesh import SkinnedMesh as GltfMesh
from ...mesh import bone_mesh
from .load import GltfAsset, load_gltf
from .save import save_gltf

__all__ = ["GltfAsset", "GltfMesh", "load_gltf", "save_gltf", "bone_mesh"]
