"""Motion and character files: BVH and glTF/GLB in and out.

* :func:`load_bvh` / :func:`save_bvh`: BVH motion capture (``kinema.io._bvh``).
* :func:`load_gltf` / :func:`save_gltf`: glTF 2.0 and GLB (``kinema.io._gltf``,
  needs the ``pygltflib`` extra; imported on first use, so ``import kinema.io``
  stays cheap and works without it).

Every writer goes through :func:`kinema.io._atomic.atomic_write`: output is
written to a temporary file and renamed, and an input is never overwritten.
Bad files raise :class:`kinema.FileFormatError` with the file and line (or JSON
path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._bvh import load_bvh, save_bvh

if TYPE_CHECKING:
    from ._gltf import load_gltf, save_gltf

__all__ = ["load_bvh", "save_bvh", "load_gltf", "save_gltf"]

#: Names served by :func:`__getattr__` on first use, with their module.
_LAZY = {"load_gltf": "._gltf", "save_gltf": "._gltf"}


def __getattr__(name: str) -> Any:
    """Import the glTF module (and pygltflib) only when its functions are first used (PEP 562)."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kinema.io' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
