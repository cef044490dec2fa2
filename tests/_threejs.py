"""Run three.js's CCDIKSolver under node (test cross-check and benchmark baseline).

Never a runtime dependency: ``three`` is installed with npm into a cache
folder (``KINEMA_NODE_CACHE`` or ``~/.cache/kinema/node-three-0.186``) the
first time it is needed.  :func:`available` says why it cannot run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

THREE_VERSION = "0.186"
HERE = Path(__file__).resolve().parent
RUNNER = HERE / "threejs_ccd.mjs"


def cache_dir() -> Path:
    base = os.environ.get("KINEMA_NODE_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "kinema" / f"node-three-{THREE_VERSION}"


def available() -> tuple[bool, str]:
    """``(ok, reason)``: node and npm present and ``three@0.186`` installed (installing it if needed)."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if not node or not npm:
        return False, "node or npm not found"
    d = cache_dir()
    pkg = d / "node_modules" / "three" / "package.json"
    if not pkg.exists():
        d.mkdir(parents=True, exist_ok=True)
        if not (d / "package.json").exists():
            (d / "package.json").write_text('{"name": "kinema-three-cache", "private": true}\n')
        try:
            proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(d),
                                   f"three@{THREE_VERSION}"], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"npm install three@{THREE_VERSION} failed: {exc}"
        if proc.returncode != 0 or not pkg.exists():
            return False, f"npm install three@{THREE_VERSION} failed: {proc.stderr[-500:]}"
    version = json.loads(pkg.read_text())["version"]
    if not version.startswith(THREE_VERSION + "."):
        return False, f"cached three is {version}, not {THREE_VERSION}.x"
    return True, version


def run_ccd(translations: np.ndarray, rotations: np.ndarray, targets: np.ndarray, iteration: int = 20,
            repeats: int = 0) -> tuple[np.ndarray, float | None]:
    """three.js CCDIKSolver on a plain chain (bone k the parent of k+1, root at the origin).

    ``translations (K,3)``, ``rotations (K,4)`` local xyzw; ``targets (N,3)``.
    Returns ``(rotations (N,K,4), median microseconds per solve or None)``.
    """
    d = cache_dir()
    shutil.copyfile(RUNNER, d / "threejs_ccd.mjs")
    data: dict[str, Any] = {
        "translations": np.asarray(translations).tolist(),
        "rotations": np.asarray(rotations).tolist(),
        "targets": np.asarray(targets).tolist(),
        "iteration": int(iteration),
        "repeats": int(repeats),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
        path = f.name
    try:
        proc = subprocess.run(["node", str(d / "threejs_ccd.mjs"), path], capture_output=True, text=True,
                              timeout=600, check=True)
    finally:
        os.unlink(path)
    res = json.loads(proc.stdout)
    return np.asarray(res["rotations"], dtype=np.float64), res["us_per_solve"]
