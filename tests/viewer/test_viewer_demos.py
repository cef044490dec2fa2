"""Every demo served in the viewer (``kinema demo NAME`` without --headless), loaded in headless Chromium.

As in test_viewer_browser.py the page is only looked at and clicked; what the server holds (the
session, the viser handles) is checked on the server side.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_viewer_browser import PAGE_TIMEOUT_MS, VIEWPORT, browser, screenshot, wait_for  # noqa: F401

from kinema.demos import _registry

pytestmark = pytest.mark.browser

#: A canvas counts as drawn when its pixel values vary more than this (an empty scene is near 0).
MIN_CANVAS_VARIANCE = 20.0


@pytest.fixture(params=_registry.available())
def demo_viewer(request: pytest.FixtureRequest) -> Iterator[Any]:
    from kinema.viewer._demo import serve_demo

    demo = _registry.load(request.param)
    v = serve_demo(demo, fps=float(demo["fps"]), port=0, block=False, verbose=False)
    yield v
    v.close()


def test_demo_page_loads_with_its_controls(browser: Any, demo_viewer: Any) -> None:  # noqa: F811
    app = demo_viewer.app
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(demo_viewer.url, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector("canvas", timeout=PAGE_TIMEOUT_MS)
    wait_for(lambda: demo_viewer.server.get_clients(), "the tab to connect")
    page.get_by_role("button", name="step").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.get_by_label("auto").wait_for(timeout=PAGE_TIMEOUT_MS)
    # the scene is drawn from the session's drawing, and keeps being redrawn
    assert app._lines and app._dots
    f0 = app.frames
    wait_for(lambda: app.frames > f0 + 5, "frames to be drawn")
    img = wait_for(lambda: (lambda im: im if im.var() > MIN_CANVAS_VARIANCE else None)(screenshot(page)),
                   "the canvas to show the scene")
    assert img.var() > MIN_CANVAS_VARIANCE
    # "step" advances the session's state (a session with one state stays in it)
    states = {app.session.state}
    page.get_by_role("button", name="step").click()
    wait_for(lambda: app.state_text.value == app.session.state, "the state to reach the panel")
    states.add(app.session.state)
    # "auto" turns the session's auto play off
    assert app.session.auto  # still on: moving the target with the script is not a drag
    if app.pointer is not None:
        # the gizmo follows the scripted pointer (a frame behind at most: 0.04 at 60 fps)
        np.testing.assert_allclose(np.asarray(app.pointer.position)[:2], app.session.pointer, atol=0.1)
    page.get_by_label("auto").click()
    wait_for(lambda: not app.session.auto, "auto to turn off")
    # a session's drawing flags (fishing: poles, grips, reach) are checkboxes that switch them
    for name in app.option_checkboxes:
        assert getattr(app.session.options, name) is False
        page.get_by_label(f"draw {name}").click()
        wait_for(lambda name=name: getattr(app.session.options, name) is True, f"draw {name} to turn on")
    if app.demo["name"] == "fishing":
        assert set(app.option_checkboxes) == {"poles", "grips", "reach"}
    if hasattr(app.session, "set_pointer"):  # follow: the draggable target is the pointer
        assert app.pointer is not None
        target = np.array([0.7, 0.9, 0.0])
        app.move_pointer(target)
        wait_for(lambda: np.linalg.norm(app.session.target - target[:2]) < 1e-3, "the arm's target to follow")
        assert np.linalg.norm(app.session.arm.end - target[:2]) < 1e-3
        assert len(states) == 2
    page.close()
