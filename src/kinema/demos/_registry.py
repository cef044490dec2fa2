"""The demo registry: ``kinema demo NAME`` name -> module, imported only when asked for.

Every demo module exposes ``DEMO = {"name": str, "make": callable(seed=0) -> session,
"fps": float}`` and optionally ``"view": (azimuth_deg, elevation_deg)`` (the PNG camera's
direction, default ``(0, 0)``: looking down -z, x right, y up) and ``"about": str``.  A session
has ``.step(dt)`` (seconds), ``.drawing() -> Drawing``, ``.state`` (a name), ``.advance_state()``
and ``.auto`` (whether it plays by itself).

Modules are imported lazily: a demo whose module is not installed (or not written yet) is left
out of :func:`available` instead of breaking the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import KinemaError
from ._draw import Drawing

__all__ = ["DEMO_MODULES", "DemoSession", "DemoNotFoundError", "available", "load", "check_descriptor"]

#: Every demo kinema knows, by name: the module that defines it (``fishing`` comes with :mod:`kinema.hands`).
DEMO_MODULES: Mapping[str, str] = {
    "follow": "kinema.demos.follow",
    "tentacles": "kinema.demos.tentacles",
    "stairs": "kinema.demos.stairs",
    "fishing": "kinema.demos.fishing",
}


class DemoSession(Protocol):
    """What every demo's ``make(seed)`` returns."""

    state: str
    auto: bool

    def step(self, dt: float) -> None: ...

    def drawing(self) -> Drawing: ...

    def advance_state(self) -> None: ...


class DemoNotFoundError(KinemaError):
    """``kinema demo NAME`` with a NAME that is not an available demo."""


def _import(name: str) -> Any | None:
    """The demo's module, or None when it (not one of its own imports) is missing."""
    module_name = DEMO_MODULES[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):  # the demo module itself is absent
            return None
        raise


def available() -> list[str]:
    """Names of the demos whose module is present, in :data:`DEMO_MODULES` order."""
    return [name for name in DEMO_MODULES if _import(name) is not None]


def check_descriptor(demo: Any, name: str) -> dict[str, Any]:
    """``demo`` (a module's ``DEMO``) checked: a mapping with ``name``, a callable ``make`` and ``fps`` > 0."""
    if not isinstance(demo, Mapping) or not callable(demo.get("make")) or demo.get("name") != name:
        raise DemoNotFoundError(f"demo module {DEMO_MODULES[name]} has no valid DEMO descriptor")
    fps = demo.get("fps")
    if not isinstance(fps, (int, float)) or not fps > 0:
        raise DemoNotFoundError(f"demo {name!r}: DEMO['fps'] must be a positive number, got {fps!r}")
    return dict(demo)


def load(name: str) -> dict[str, Any]:
    """The ``DEMO`` descriptor of demo ``name``; :class:`DemoNotFoundError` (listing the names) if there is none."""
    module = _import(name) if name in DEMO_MODULES else None
    if module is None:
        raise DemoNotFoundError(f"unknown demo {name!r}; choose one of: {', '.join(available())}")
    return check_descriptor(getattr(module, "DEMO", None), name)
