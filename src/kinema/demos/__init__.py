"""The seed demos (``kinema demo NAME``): scenes that show the library doing a whole job.

Each demo is a module that reads as an example of using kinema well; every one produces,
frame after frame, a :class:`~kinema.demos._draw.Drawing` (world-space lines and dots) that
the renderers turn into PNG frames (headless) or a viewer scene.
"""

from __future__ import annotations

__all__: list[str] = []
