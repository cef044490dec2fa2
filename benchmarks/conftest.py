"""Benchmarks run with pytest-benchmark: ``pytest benchmarks --benchmark-only``.

Each file times kinema side by side with a baseline in the same run; none of
them asserts a time.

The files are named ``bench_*.py`` (so the default test run, ``testpaths =
["tests"]``, never picks them up); :func:`pytest_collect_file` makes pytest
collect them whenever it is pointed at this folder, from any working folder
and whatever ``python_files`` says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: File names this folder's benchmarks use.
BENCH_GLOB = "bench_*.py"


def pytest_collect_file(file_path: Path, parent: Any) -> pytest.Module | None:
    if file_path.match(BENCH_GLOB) and file_path.parent == Path(__file__).parent:
        return pytest.Module.from_parent(parent, path=file_path)  # type: ignore[no-any-return]
    return None
