"""``kinema bench --quick --json F --plot P``: the suite's rows, its peers, its pictures, its busy process.

Each run is a fresh ``python -m kinema.cli`` process.  No time is asserted anywhere: only the shape of
the report, the accuracy fractions, which ratios exist, and that nothing is left running.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kinema.bench._suite import ACCURACY_FIELDS, ROW_FIELDS
from kinema.io._atomic import remove_stale_work_folders

WORKLOADS = ["fk", "two_bone", "ccd_10bone", "fabrik_10bone", "ccd_tentacle", "fabrik_tentacle", "dls_10bone",
             "dls_humanoid", "bvh_parse", "footlock", "motion_sweeps"]
PARALLEL = {"fk", "two_bone", "ccd_10bone", "fabrik_10bone", "ccd_tentacle", "fabrik_tentacle", "dls_10bone",
            "dls_humanoid"}
#: Marks the busy process's command line (kinema.bench._timing._BUSY_CODE).
BUSY_MARK = "while os.getppid() == parent"
HAS_MATPLOTLIB = __import__("importlib").util.find_spec("matplotlib") is not None


def _kinema(argv: list[str], hide: tuple[str, ...] = (), timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``kinema ARGV`` in a fresh process, with the Python modules ``hide`` made unimportable."""
    code = ("import sys\n"
            f"for name in {list(hide)!r}:\n    sys.modules[name] = None\n"
            "from kinema.cli import main\n"
            f"sys.exit(main({argv!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _busy_children(parent: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if BUSY_MARK in cmd and ppid == parent:
            out.append(int(d.name))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    folder = tmp_path_factory.mktemp("bench")
    argv = ["bench", "--quick", "--json", str(folder / "bench.json")]
    if HAS_MATPLOTLIB:
        argv += ["--plot", str(folder / "bench.png")]
    res = _kinema(argv)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((folder / "bench.json").read_text()), res.stdout, folder


def test_one_row_per_workload_with_the_documented_fields(report: tuple[dict[str, Any], str, Path]) -> None:
    data, out, _ = report
    rows = data["rows"]
    assert [r["workload"] for r in rows] == WORKLOADS
    assert data["quick"] is True and data["repeats"] >= 1
    for r in rows:
        assert r["workload"] in out  # every workload has a line in the printed table
        if r["workload"] == "motion_sweeps":  # present only in a build with the sweeps (issue 18)
            assert r["reason"].startswith("not available") if not r["available"] else r["figures"]
            continue
        assert set(ROW_FIELDS) <= set(r), r["workload"]
        assert r["solves_per_s"] > 0 and math.isfinite(r["solves_per_s"])
        assert r["batch_s_iqr"][0] <= r["batch_s"] <= r["batch_s_iqr"][1]
        for key in ("within_1e-3", "within_1e-4"):
            if r[key] is not None:
                assert 0.0 <= r[key] <= 1.0
        if r["within_1e-4"] is not None:
            assert r["within_1e-4"] <= r["within_1e-3"]
            assert 0.0 <= r["median_error"] <= r["worst_error"]
        assert r["parallel"] == (r["workload"] in PARALLEL)


def test_exact_solvers_are_exact_in_the_report(report: tuple[dict[str, Any], str, Path]) -> None:
    """The accuracy columns carry real errors: FK agrees with NumPy, two-bone meets the best reachable
    error, DLS meets every reachable target, BVH parsing keeps the sample within 1e-6."""
    rows = {r["workload"]: r for r in report[0]["rows"]}
    assert rows["fk"]["worst_error"] <= 1e-10
    assert rows["two_bone"]["worst_error"] <= 1e-12
    assert rows["dls_10bone"]["within_1e-4"] == 1.0 and rows["dls_10bone"]["worst_error"] <= 1e-6
    assert rows["dls_humanoid"]["worst_error"] <= 1e-6
    assert rows["bvh_parse"]["worst_error"] <= 1e-6
    assert rows["ccd_10bone"]["within_1e-3"] < rows["fabrik_10bone"]["within_1e-3"]  # 20 sweeps: 0.72 vs 0.985


def test_ratios_exist_exactly_for_the_peers_that_ran(report: tuple[dict[str, Any], str, Path]) -> None:
    rows = {r["workload"]: r for r in report[0]["rows"]}
    for r in rows.values():
        ratio_names = {k[len("ratio_vs_"):] for k in r if k.startswith("ratio_vs_")}
        ran = {name for name, e in r["peers"].items() if e["available"]}
        assert ratio_names == ran, r["workload"]
        for name in ran:
            assert r[f"ratio_vs_{name}"] > 0 and math.isfinite(r[f"ratio_vs_{name}"])
            assert r["peers"][name]["basis"] in ("batch", "single")
            for key in ACCURACY_FIELDS:
                assert key in r["peers"][name]
        for e in r["peers"].values():
            if not e["available"]:
                assert e["reason"]
    # NumPy is always there: the closed forms and FK always have their baseline
    assert "ratio_vs_numpy" in rows["fk"] and "ratio_vs_numpy" in rows["two_bone"]
    assert rows["fk"]["peers"]["numpy"]["worst_error"] is None  # NumPy is FK's reference
    assert rows["two_bone"]["peers"]["numpy"]["worst_error"] <= 1e-9  # the same maths


def test_parallel_rows_ran_beside_a_busy_process_that_is_gone(report: tuple[dict[str, Any], str, Path]) -> None:
    data, out, _ = report
    for r in data["rows"]:
        if r["workload"] in PARALLEL:
            assert r["busy"]["solves_per_s"] > 0
            assert r["busy_over_quiet"] == pytest.approx(r["busy"]["batch_s"] / r["batch_s"], rel=1e-12)
        else:
            assert "busy" not in r
    assert "beside busy" in out
    assert isinstance(data["busy_pid"], int) and not _running(data["busy_pid"])


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib not installed (kinema[bench])")
def test_plots_are_non_blank_pngs(report: tuple[dict[str, Any], str, Path]) -> None:
    from PIL import Image

    data, _, folder = report
    for name in ("bench.png", "bench-throughput.png"):
        path = folder / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = np.asarray(Image.open(path).convert("RGB"))
        assert img.shape[0] > 200 and img.shape[1] > 200
        colours = np.unique(img.reshape(-1, 3), axis=0)
        assert len(colours) > 20  # axes, text and several coloured lines, not a blank canvas
    solvers = {p["solver"] for p in data["plot"]["accuracy"]}
    assert {"kinema CCD", "kinema FABRIK", "kinema DLS (defaults)"} <= solvers
    assert {p["solver"] for p in data["plot"]["throughput"]} >= {"two-bone (arm)", "CCD (10 bones)"}
    assert not list(folder.glob("*.tmp*")) and sorted(p.name for p in folder.iterdir()) == sorted(
        ["bench.json", "bench.png", "bench-throughput.png"])


def test_an_absent_peer_is_a_row_saying_so(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    res = _kinema(["bench", "--quick", "--repeat", "1", "--json", str(out)], hide=("ikpy", "bvhio"))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {r["workload"]: r for r in json.loads(out.read_text())["rows"]}
    for workload in ("ccd_10bone", "fabrik_10bone", "dls_10bone"):
        entry = rows[workload]["peers"]["ikpy"]
        assert entry["available"] is False and "not installed" in entry["reason"]
        assert "ratio_vs_ikpy" not in rows[workload]
    assert rows["bvh_parse"]["peers"]["bvhio"]["available"] is False and "ratio_vs_bvhio" not in rows["bvh_parse"]
    assert "peer absent: ccd_10bone: ikpy: not installed" in res.stdout
    assert "peer absent: bvh_parse: bvhio: not installed" in res.stdout


def test_plot_without_matplotlib_is_refused_in_one_line(tmp_path: Path) -> None:
    res = _kinema(["bench", "--quick", "--plot", str(tmp_path / "p.png")], hide=("matplotlib",), timeout=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0 and len(lines) == 1 and "Traceback" not in res.stderr
    assert 'pip install "kinema[bench]"' in lines[0] and "matplotlib" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_existing_outputs_need_force(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    out.write_text("keep")
    res = _kinema(["bench", "--quick", "--json", str(out)], timeout=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0 and len(lines) == 1 and "already exists" in lines[0] and "--force" in lines[0]
    assert out.read_text() == "keep"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_busy_process_is_left_behind_when_interrupted(sig: signal.Signals, tmp_path: Path) -> None:
    """Interrupt the suite while its busy process runs: Ctrl-C kills and reaps it on the way out; a
    SIGKILL of the suite leaves it an orphan, which notices and exits on its own."""
    code = "import sys\nfrom kinema.cli import main\nsys.exit(main(['bench', '--quick', '--no-progress']))\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        busy: list[int] = []
        while not busy and proc.poll() is None and time.monotonic() < deadline:
            busy = _busy_children(proc.pid)
            time.sleep(0.05)
        assert busy, "the suite never started its busy process"
        os.kill(proc.pid, sig)
        proc.wait(60)
        end = time.monotonic() + 10
        while _running(busy[0]) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _running(busy[0])
        # Its work folder (the generated captures): removed on Ctrl-C; a SIGKILL leaves it to the next command
        left = list(Path(tempfile.gettempdir()).glob(f"kinema-bench-{proc.pid}-*"))
        if sig == signal.SIGINT:
            assert left == []
        else:
            assert len(left) == 1
            assert str(left[0]) in remove_stale_work_folders("bench") and not left[0].exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_motion_sweeps_row_calls_the_benchmarks_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With kinema._sweeps importable and a bench_motion.py offering figures(quick=...), the row
    carries its figures; without figures() it says so; without kinema._sweeps it says so."""
    import types

    from kinema.bench._suite import motion_sweeps_row

    script = tmp_path / "bench_motion.py"
    script.write_text("def figures(quick):\n    return {'pop_ratio_1deg': 2.5 if quick else 3.0, 'twist_deg': 0}\n")
    monkeypatch.setitem(sys.modules, "kinema._sweeps", None)
    assert motion_sweeps_row(True, script)["reason"] == "not available: this build has no kinema._sweeps"
    monkeypatch.setitem(sys.modules, "kinema._sweeps", types.ModuleType("kinema._sweeps"))
    row = motion_sweeps_row(True, script)
    assert row["available"] and row["figures"] == {"pop_ratio_1deg": 2.5, "twist_deg": 0.0} and row["items"] == 2
    assert motion_sweeps_row(False, script)["figures"]["pop_ratio_1deg"] == 3.0
    script.write_text("X = 1\n")
    assert "has no figures" in motion_sweeps_row(True, script)["reason"]
    assert "not found" in motion_sweeps_row(True, tmp_path / "missing.py")["reason"]
