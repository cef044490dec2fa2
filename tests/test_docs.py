"""The documentation: every ```python block in docs/ runs, and ``mkdocs build --strict`` builds the site.

Blocks of one page run in order in one namespace (a later block may use an
earlier one's names), each page in a fresh subprocess with a timeout, from a
temporary working folder (so an example that writes a file leaves nothing in
the repository).  A failure names the page and the block's first line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Seconds one page's examples may take (cold numba compiles included).
PAGE_TIMEOUT_S = 300
#: Seconds ``mkdocs build`` may take.
BUILD_TIMEOUT_S = 300

#: A fenced Python block: the fence opens a line with ```python and closes at the next ``` line.
_PYTHON_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)

#: The page runner: executes the blocks in one namespace, stops at the first failure and says which block.
_RUNNER = r"""
import json, sys, traceback
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for i, (line, code) in enumerate(blocks):
    try:
        exec(compile(code, f"<block {i + 1} at line {line}>", "exec"), namespace)
    except BaseException:
        sys.stderr.write(f"BLOCK {i + 1} (line {line}) FAILED\n" + traceback.format_exc())
        sys.exit(1)
"""


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line number of the opening fence, code)`` for every ```python block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _PYTHON_BLOCK.finditer(text)]


PAGES = sorted(p for p in DOCS.rglob("*.md") if python_blocks(p))


def test_docs_have_runnable_examples() -> None:
    # The pages the docs promise examples on: losing one (or breaking the fence syntax) fails here.
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    for page in ("getting-started.md", "solvers/two-bone.md", "solvers/ccd.md", "solvers/fabrik.md",
                 "solvers/dls.md", "limits.md", "rigs.md", "motion-quality.md", "files.md", "viewer.md",
                 "performance.md"):
        assert page in names, f"docs/{page} has no ```python example"


def test_block_extraction_keeps_order_and_lines(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# t\n\n```python\na = 1\n```\n\ntext\n\n```bash\nls\n```\n\n```python\nb = a + 1\n```\n")
    assert python_blocks(page) == [(3, "a = 1\n"), (13, "b = a + 1\n")]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = python_blocks(page)
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(blocks), capture_output=True,
                          text=True, timeout=PAGE_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, f"docs/{page.relative_to(DOCS).as_posix()}: {proc.stderr[-4000:]}"


@pytest.mark.skipif(importlib.util.find_spec("griffe") is None, reason="griffe (mkdocstrings[python]) is not installed")
def test_rst_roles_become_optional_cross_references() -> None:
    spec = importlib.util.spec_from_file_location("rst_roles", DOCS / "_ext" / "rst_roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "raises :class:`~kinema.SolverInputError`; see :func:`solve_two_bone` and ``x``."
    assert module.convert_roles(text) == (
        'raises <autoref identifier="kinema.SolverInputError" optional><code>SolverInputError</code></autoref>; '
        'see <autoref identifier="kinema.solve_two_bone" optional><code>solve_two_bone</code></autoref> and ``x``.')
    assert module.convert_roles("no roles: a `code` span") == "no roles: a `code` span"
    assert module.convert_roles("Example::\n\n    x = 1  # a::b\n") == "Example:\n\n    x = 1  # a::b\n"


@pytest.mark.skipif(importlib.util.find_spec("PIL") is None, reason="Pillow is not installed (the test extra)")
def test_figure_script_draws_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(DOCS / "images" / "make_figures.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=PAGE_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    from PIL import Image

    for name in ("two_bone.png", "ccd.png", "fabrik.png", "dls.png", "limits.png"):
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.width >= 600 and image.height >= 400
            assert len(image.getcolors(1 << 16) or ()) > 2  # something was drawn on the white
        assert (DOCS / "images" / name).is_file(), f"docs/images/{name} is not committed"


#: The command-line page's section whose commands need only the bundled sample, and the files they write.
_CLI_TRY_IT = re.compile(r"^## Try it on the bundled sample\n.*?^```bash\n(.*?)^```", re.S | re.M)
_CLI_TRY_IT_OUTPUTS = ("walk.bvh", "walk.glb", "walk_locked.bvh", "walk_reach.bvh", "glb/walk.glb")


def test_cli_try_it_commands_run(tmp_path: Path) -> None:
    match = _CLI_TRY_IT.search((DOCS / "cli.md").read_text(encoding="utf-8"))
    assert match is not None, "docs/cli.md lost its 'Try it on the bundled sample' block"
    script = "set -euo pipefail\n" + match.group(1)
    bin_dir = str(Path(sys.executable).parent)  # this environment's `kinema`
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=PAGE_TIMEOUT_S,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, f"docs/cli.md try-it block: {proc.stderr[-4000:]}"
    for name in _CLI_TRY_IT_OUTPUTS:
        assert (tmp_path / name).is_file() and (tmp_path / name).stat().st_size > 0, f"{name} was not written"
    assert "15" in proc.stdout and "39" in proc.stdout  # kinema info: joints and frames of the walk


#: Every page of the nav, as the built site's folders (mkdocs writes ``page/index.html`` per page).
SITE_PAGES = (
    "index.html", "getting-started/index.html", "solvers/index.html", "solvers/two-bone/index.html",
    "solvers/ccd/index.html", "solvers/fabrik/index.html", "solvers/dls/index.html", "limits/index.html",
    "rigs/index.html", "motion-quality/index.html", "files/index.html", "cli/index.html", "viewer/index.html",
    "performance/index.html", "reference/solvers/index.html", "reference/goals-limits/index.html",
    "reference/core/index.html", "reference/rig-filters/index.html", "reference/io/index.html",
    "reference/errors/index.html",
)


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="mkdocs and mkdocstrings are not installed (pip install -e '.[docs]')")
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for page in SITE_PAGES:
        assert (site / page).is_file(), f"the site lacks {page}"
    # The API reference is generated from the docstrings: the solver classes and their docs are there.
    api = (site / "reference/solvers/index.html").read_text(encoding="utf-8")
    for name in ("kinema.TwoBone", "kinema.CCD", "kinema.FABRIK", "kinema.FABRIKTree", "kinema.DLS",
                 "kinema.solve_two_bone", "kinema.solve_dls"):
        assert f'id="{name}"' in api, f"the API reference lacks {name}"
    assert "cyclic coordinate descent" in api  # solve_ccd's docstring rendered
    # Sphinx roles became links to the documented objects (docs/_ext/rst_roles.py), none is left raw.
    assert 'href="../errors/#kinema.SolverInputError"' in api
    assert ":class:" not in api and ":func:" not in api and "Example::" not in api
    for image in ("viewer.png", "two_bone.png", "ccd.png", "fabrik.png", "dls.png", "limits.png"):
        assert (site / "images" / image).is_file(), f"the site lacks images/{image}"
    assert not (site / "images/make_figures.py").exists()
