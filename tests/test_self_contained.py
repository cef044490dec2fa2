"""The tests are self-contained: a clean clone runs them with no folder beside it.

The third-party files the tests read live in ``tests/data`` (copied byte for
byte with their SOURCES.md and licence files).  Checked here: no test refers
to the project's old data folder beside the clone; the copies are exactly the files
their SOURCES.md describe; and a copy of the repository's files (what a clone
holds: tracked plus not-ignored files), put in a temporary folder with nothing
beside it, runs the tests that read each data file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TEST_DATA

ROOT = Path(__file__).resolve().parents[1]

#: Spellings of the old data folder beside the clone: its relative path, a ``Path`` built from its
#: name and ``"data"``, its name followed by ``/data`` (the name is built from pieces so that this file
#: does not match itself).
_SHARED = "sha" + "red"
OUTSIDE_DATA = re.compile(r"\.\./" + _SHARED + r"|['\"]" + _SHARED + r"['\"]\s*/|\b" + _SHARED + r"/data")

#: One test per data file, run in the clean copy (a few seconds): the glTF summaries (all three
#: glTF files), the BVH capture, and a real-rig solve on RiggedFigure.
CLEAN_COPY_TESTS = (
    "tests/test_gltf.py::test_real_file_summaries",
    "tests/test_bvh.py::test_real_file_structure_and_first_frame",
    "tests/test_real_rigs.py::test_each_solver_reaches_on_the_real_rig",
)
#: How long the nested run may take (it takes about 5 s; cold imports on a loaded machine more).
CLEAN_COPY_TIMEOUT_S = 300


def _test_sources() -> list[Path]:
    return sorted(p for p in (ROOT / "tests").rglob("*.py") if p.is_file())


def test_no_test_reads_outside_the_repository() -> None:
    offenders = []
    for path in _test_sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE_DATA.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "tests refer to a folder outside the repository:\n" + "\n".join(offenders)


def _table_rows(sources_md: Path) -> list[list[str]]:
    """Cells of the markdown table rows whose first cell names a file (backticks stripped)."""
    rows = []
    for line in sources_md.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not set(line) <= set("|- "):
            cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
            cells[0] = cells[0].split("`")[0]  # "`name` (older revision)" -> "name"
            if (TEST_DATA / sources_md.parent.name / cells[0]).is_file():
                rows.append(cells)
    return rows


def test_gltf_copies_match_their_sources_sha256() -> None:
    rows = _table_rows(TEST_DATA / "gltf" / "SOURCES.md")
    names = {r[0] for r in rows}
    assert names == {"RiggedSimple.gltf", "RiggedFigure.gltf", "RiggedSimple-2e6fed56.gltf"}
    for cells in rows:
        data = (TEST_DATA / "gltf" / cells[0]).read_bytes()
        size = int(cells[3].replace(",", ""))
        digest = next(c for c in cells if re.fullmatch(r"[0-9a-f]{64}", c))
        assert len(data) == size, cells[0]
        assert hashlib.sha256(data).hexdigest() == digest, cells[0]


def test_bvh_copy_matches_its_sources_and_keeps_its_licence() -> None:
    rows = _table_rows(TEST_DATA / "bvh" / "SOURCES.md")
    assert [r[0] for r in rows] == ["test_mocapbank.bvh"]
    size = int(rows[0][3].replace(",", "").removesuffix(" B"))
    assert (TEST_DATA / "bvh" / "test_mocapbank.bvh").stat().st_size == size
    licence = (TEST_DATA / "bvh" / "LICENSE.bvhtoolbox-MIT.txt").read_text(encoding="utf-8")
    assert "MIT" in licence or "Permission is hereby granted" in licence
    assert "CC BY 4.0" in (TEST_DATA / "gltf" / "SOURCES.md").read_text(encoding="utf-8")


def _repository_files() -> list[str]:
    """What a clone would hold: tracked files plus untracked ones git does not ignore (paths, relative)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True, timeout=60).stdout
    return [p for p in out.decode("utf-8").split("\0") if p and (ROOT / p).is_file()]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_clean_copy_runs_its_data_tests_with_nothing_beside_it(tmp_path: Path) -> None:
    clone = tmp_path / "kinema"
    files = _repository_files()
    data_files = {p for p in files if p.startswith("tests/data/")}
    assert {"tests/data/bvh/test_mocapbank.bvh", "tests/data/gltf/RiggedFigure.gltf",
            "tests/data/gltf/SOURCES.md", "tests/data/bvh/SOURCES.md"} <= data_files, "test data is git-ignored"
    for rel in files:
        dest = clone / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, dest)
    assert not (tmp_path / _SHARED).exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KINEMA_"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "--rootdir", str(clone), "-c", str(clone / "pyproject.toml"), *CLEAN_COPY_TESTS],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=CLEAN_COPY_TIMEOUT_S)
    tail = (run.stdout + run.stderr)[-3000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) == 5, tail  # 1 + 1 + 3 solvers
    assert "error" not in run.stdout.splitlines()[-1], tail
