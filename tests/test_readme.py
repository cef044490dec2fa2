"""The README's first-solve example runs as written and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_first_solve_example_runs_and_reaches() -> None:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## A first solve\n\n```python\n(.*?)```", text, re.S)
    assert block is not None, "the README lost its first-solve example"
    proc = subprocess.run([sys.executable, "-c", block.group(1)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    reached, error = lines[0].split()
    assert reached == "True" and float(error) < 1e-12
    assert float(lines[1]) < 1e-12  # the hand rebuilt by FK is on the target
    shape, fraction = lines[2].rsplit(" ", 1)
    assert shape == "(1000000, 15, 4)" and 0.5 < float(fraction) < 1.0
