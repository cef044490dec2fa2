"""Command-line fixes: ``--progress`` off a terminal, ``bench``'s output folders and ``--plot`` name, folder and
file messages, ``python -m kinema``, a missed reach in the batch table, the FK yardstick's warm-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _cli import one_error_line, run
from kinema.fk import FK_PARALLEL_MIN_JOINTS

#: A progress line: ``kinema: TEXT`` (:class:`kinema.cli._ui._Lines`).
PROGRESS_LINE = re.compile(r"kinema: .+")
#: A progress bar's count line: ``kinema: TEXT: DONE/TOTAL``.
COUNT_LINE = re.compile(r"kinema: (?P<text>.+): (?P<done>[0-9]+)/(?P<total>[0-9]+)")


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled walk as a BVH file (39 frames)."""
    from kinema.cli import main

    path = tmp_path_factory.mktemp("walk") / "walk.bvh"
    assert main(["sample", "walk", "-o", str(path), "-q"]) == 0
    return path


@pytest.fixture
def captures(walk: Path, tmp_path: Path) -> Path:
    """A folder (without an extension) of three copies of the walk."""
    folder = tmp_path / "captures"
    folder.mkdir()
    for name in ("a.bvh", "b.bvh", "c.bvh"):
        (folder / name).write_bytes(walk.read_bytes())
    return folder


# ------------------------------------------------------------ 1. --progress
def test_progress_writes_lines_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str], walk: Path,
                                                            tmp_path: Path) -> None:
    """``--progress`` with stderr captured (not a terminal) writes each step as a line; without it, nothing."""
    code, out, err = run(capsys, "footlock", walk, "-o", tmp_path / "p.bvh", "--progress")
    assert code == 0, err
    lines = err.splitlines()
    assert all(PROGRESS_LINE.fullmatch(ln) for ln in lines), err
    assert lines[0] == "kinema: loading"
    assert f"kinema: footlock: {walk}" in lines
    assert f"kinema: writing {tmp_path / 'p.bvh'}" in lines
    assert re.fullmatch(r"kinema: done in [0-9]+\.[0-9]{2} s", lines[-1]), lines[-1]
    assert "wrote" in out and "kinema:" not in out  # results stay on stdout, progress on stderr only
    code, _, err = run(capsys, "footlock", walk, "-o", tmp_path / "q.bvh")
    assert code == 0 and err == ""
    code, _, err = run(capsys, "footlock", walk, "-o", tmp_path / "r.bvh", "--no-progress")
    assert code == 0 and err == ""


def test_batch_progress_counts_every_file_once(capsys: pytest.CaptureFixture[str], captures: Path,
                                               tmp_path: Path) -> None:
    code, _, err = run(capsys, "batch", "footlock", captures, "-o", tmp_path / "out", "--workers", "1",
                       "--progress")
    assert code == 0, err
    counts = [COUNT_LINE.fullmatch(ln) for ln in err.splitlines()]
    assert all(counts), err
    done = [int(m["done"]) for m in counts if m]
    assert {m["total"] for m in counts if m} == {"3"}
    assert all(m["text"].startswith("footlock (serial)") for m in counts if m)  # (a compile notice may follow)
    assert done[0] == 0 and done[-1] == 3 and done == sorted(done)  # first and last always, never backwards
    code, _, err = run(capsys, "batch", "footlock", captures, "-o", tmp_path / "out2", "--workers", "1")
    assert code == 0 and err == ""


def test_progress_lines_are_throttled(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Many files within :data:`LINE_INTERVAL_S`: only the first and the last count; then one line per interval."""
    from kinema.cli import _ui

    now = [100.0]
    monkeypatch.setattr(_ui.time, "perf_counter", lambda: now[0])
    ui = _ui.UI(progress=True)
    with ui.progress(1000, "convert") as bar:
        for _ in range(999):
            now[0] += 0.4 * _ui.LINE_INTERVAL_S / 999  # all of them within less than one interval
            bar.advance()
        now[0] += _ui.LINE_INTERVAL_S
        bar.advance()
    assert capsys.readouterr().err.splitlines() == ["kinema: convert: 0/1000", "kinema: convert: 1000/1000"]
    with ui.progress(10, "convert") as bar:
        for _ in range(10):
            now[0] += 0.5 * _ui.LINE_INTERVAL_S  # one line for every second file
            bar.advance()
    assert capsys.readouterr().err.splitlines() == [f"kinema: convert: {k}/10" for k in (0, 2, 4, 6, 8, 10)]


def test_a_failed_step_ends_without_done(capsys: pytest.CaptureFixture[str]) -> None:
    """The error's own message follows a step that failed, not "done"."""
    from kinema.cli import _ui

    ui = _ui.UI(progress=True)
    with pytest.raises(RuntimeError), ui.status("loading") as st:
        st.describe("loading")  # the same text again: no new line
        raise RuntimeError("bad file")
    assert capsys.readouterr().err == "kinema: loading\n"


# ------------------------------------------------ 2. bench's output folders
def _stub_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's runs replaced by empty results (the command's file handling is what is tested here)."""
    from kinema.bench import _plot, _suite

    result = {"rows": [], "load_average": [0.0, 0.0, 0.0], "repeats": 1, "cpus": 1, "seconds": 0.0}
    monkeypatch.setattr(_suite, "run_suite", lambda sizes, quick, status: dict(result))
    monkeypatch.setattr(_suite, "chain_accuracy_curves", lambda sizes, iterations, status: [])
    monkeypatch.setattr(_suite, "batch_size_curves", lambda sizes, batches, status: [])
    monkeypatch.setattr(_plot, "pyplot", lambda: None)

    monkeypatch.setattr(_plot, "plot_accuracy", lambda *args: b"\x89PNG\r\n\x1a\n")
    monkeypatch.setattr(_plot, "plot_throughput", lambda *args: b"\x89PNG\r\n\x1a\n")


def test_bench_makes_missing_output_folders(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    _stub_suite(monkeypatch)
    code, out, err = run(capsys, "bench", "--quick", "--json", tmp_path / "new" / "deep" / "b.json",
                         "--plot", tmp_path / "pics" / "p.png")
    assert code == 0, err
    assert json.loads((tmp_path / "new" / "deep" / "b.json").read_text())["rows"] == []
    assert sorted(p.name for p in (tmp_path / "pics").iterdir()) == ["p-throughput.png", "p.png"]
    assert f"wrote {tmp_path / 'new' / 'deep' / 'b.json'}" in out


def test_bench_removes_the_folders_it_made_when_a_write_fails(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    from kinema.cli import _bench

    _stub_suite(monkeypatch)
    made: list[bool] = []

    def full_disk(path: str, mode: str) -> Any:
        made.append(os.path.isdir(os.path.dirname(path)))  # its folder was made for it
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_bench, "atomic_write", full_disk)
    code, _, err = run(capsys, "bench", "--quick", "--json", tmp_path / "j" / "b.json",
                       "--plot", tmp_path / "pics" / "deep" / "p.png")
    assert code == 1 and "No space left on device" in one_error_line(err)
    assert made == [True]  # the first write failed, the command stopped there
    assert list(tmp_path.iterdir()) == []  # nothing written, no folder left


def test_bench_refuses_an_output_under_a_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """An output folder that cannot be made (a file in its path) is refused before the suite runs."""
    _stub_suite(monkeypatch)
    (tmp_path / "f").write_text("keep")
    code, _, err = run(capsys, "bench", "--quick", "--json", tmp_path / "f" / "x" / "b.json")
    assert code == 1 and f"{tmp_path / 'f'} is not a folder" in one_error_line(err)
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_text() == "keep"


# ----------------------------------------------------------- 7. --plot name
@pytest.mark.parametrize("name", ["plot.txt", "plot", "plot.png.txt", "plot.jpg"])
def test_bench_plot_must_be_png(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path, name: str) -> None:
    _stub_suite(monkeypatch)
    code, _, err = run(capsys, "bench", "--quick", "--plot", tmp_path / name)
    assert code == 2 and "--plot writes PNG images" in one_error_line(err) and name in err
    assert list(tmp_path.iterdir()) == []
    code, _, err = run(capsys, "bench", "--quick", "--plot", tmp_path / "ok.PNG")  # any case of .png
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok-throughput.PNG", "ok.PNG"]


# ----------------------------------------------------- 3. folders and files
@pytest.mark.parametrize("argv", [("info", "{d}"), ("footlock", "{d}", "-o", "{t}/x.bvh"),
                                  ("convert", "{d}", "{t}/x.glb"),
                                  ("reach", "{d}", "-o", "{t}/x.bvh", "--effector", "right_wrist",
                                   "--target", "0,1,0", "--frames", "0:5")])
def test_a_folder_as_input_is_said_to_be_a_folder(capsys: pytest.CaptureFixture[str], captures: Path,
                                                  tmp_path: Path, argv: tuple[str, ...]) -> None:
    code, _, err = run(capsys, *(a.format(d=captures, t=tmp_path) for a in argv))
    assert code == 1 and one_error_line(err) == f"kinema: error: {captures}: is a folder, not a file"
    assert not (tmp_path / "x.bvh").exists() and not (tmp_path / "x.glb").exists()


@pytest.mark.parametrize("command", ["convert", "footlock"])
def test_a_folder_as_output_is_said_to_be_a_folder(capsys: pytest.CaptureFixture[str], walk: Path, captures: Path,
                                                   command: str) -> None:
    argv = [command, walk, captures] if command == "convert" else [command, walk, "-o", captures]
    before = sorted(p.name for p in captures.iterdir())
    for force in ([], ["--force"]):
        code, _, err = run(capsys, *argv, *force)
        assert code == 1 and one_error_line(err) == f"kinema: error: {captures}: is a folder; give a file name"
    assert sorted(p.name for p in captures.iterdir()) == before


def test_an_unknown_extension_is_still_named(capsys: pytest.CaptureFixture[str], walk: Path, tmp_path: Path) -> None:
    """Not a folder: the extension is the problem (a missing path without one too)."""
    code, _, err = run(capsys, "convert", walk, tmp_path / "x.txt")
    assert code == 2 and "unknown file type '.txt'" in one_error_line(err)
    code, _, err = run(capsys, "info", tmp_path / "nothing")
    assert code == 1 and "unknown file type '(no extension)'" in one_error_line(err)


def test_batch_on_a_file_says_it_is_a_file(capsys: pytest.CaptureFixture[str], walk: Path, tmp_path: Path) -> None:
    code, _, err = run(capsys, "batch", "footlock", walk, "-o", tmp_path / "out")
    line = one_error_line(err)
    assert code == 1 and line.startswith(f"kinema: error: {walk}: is a file, not a folder"), line
    assert "kinema footlock FILE -o OUT" in line
    assert not (tmp_path / "out").exists()
    code, _, err = run(capsys, "batch", "footlock", tmp_path / "missing", "-o", tmp_path / "out")
    assert code == 1 and one_error_line(err) == f"kinema: error: {tmp_path / 'missing'}: no such folder"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs: POSIX")
def test_batch_on_a_fifo_names_what_it_is(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    code, _, err = run(capsys, "batch", "convert", tmp_path / "pipe", "-o", tmp_path / "out")
    assert code == 1 and f"{tmp_path / 'pipe'}: is a FIFO, not a folder" in one_error_line(err)


# --------------------------------------------------------- 4. python -m kinema
def _modules_after(module: str) -> tuple[int, str, list[str]]:
    """``python -m MODULE --version`` in a fresh process: its exit status, its stdout and the modules it loaded."""
    code = ("import runpy, sys\n"
            "sys.argv = ['kinema', '--version']\n"
            "try:\n"
            f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
            "except SystemExit as e:\n"
            "    status = e.code\n"
            "print(status)\n"
            "print(' '.join(sorted(sys.modules)))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    *version, status, modules = res.stdout.splitlines()
    return int(status), "\n".join(version), modules.split()


def test_python_m_kinema_is_the_command() -> None:
    res = subprocess.run([sys.executable, "-m", "kinema", "--version"], capture_output=True, text=True, timeout=120)
    ref = subprocess.run([sys.executable, "-m", "kinema.cli", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and ref.returncode == 0, res.stderr
    assert res.stdout == ref.stdout and re.fullmatch(r"kinema \S+\n", res.stdout) and res.stderr == ""


def test_python_m_kinema_imports_what_the_cli_entry_imports() -> None:
    status, version, modules = _modules_after("kinema")
    ref_status, ref_version, ref_modules = _modules_after("kinema.cli")
    assert status == ref_status == 0 and version == ref_version
    assert re.fullmatch(r"kinema \S+", version)
    assert set(modules) ^ set(ref_modules) <= {"kinema.__main__", "kinema.cli.__main__"}  # nothing else


# ------------------------------------------------- 5. a missed reach's result
def test_describe_joins_its_parts_without_a_dangling_separator() -> None:
    from kinema.cli._batch import _describe

    missed = {"status": "missed", "error_max_units": 7.101, "tolerance_units": 1.31e-6, "units": "m", "frames": 39}
    ok = {**missed, "status": "ok", "error_max_units": 1e-7}
    skate = {"skate_before_units_per_s": 0.2, "skate_after_units_per_s": 0.01, "skate_reduction_percent": 95.0}
    assert _describe("reach", {"metrics": missed}) == ("39", "missed by 7.101 m (tolerance 1.31e-06 m)")
    assert _describe("reach", {"metrics": ok}) == ("39", "error 1e-07 m")
    assert _describe("footlock", {"metrics": {**missed, **skate}}) == (
        "39", "missed by 7.101 m (tolerance 1.31e-06 m); skate 0.2 -> 0.01 m/s (-95.0%)")
    assert _describe("footlock", {"metrics": {**ok, **skate}}) == ("39", "skate 0.2 -> 0.01 m/s (-95.0%)")
    for command in ("reach", "footlock", "convert"):
        for m in (missed, ok):
            result = _describe(command, {"metrics": {**m, **skate, "joints": 15}})[1]
            assert result == result.strip() and not result.endswith(";") and ";;" not in result


def test_batch_reach_missed_row_ends_with_the_tolerance(capsys: pytest.CaptureFixture[str], captures: Path,
                                                        tmp_path: Path) -> None:
    code, out, _ = run(capsys, "batch", "reach", captures, "-o", tmp_path / "out", "--effector", "right_wrist",
                       "--target", "5,5,5", "--frames", "10:20", "--workers", "1")
    assert code == 3
    rows = [ln for ln in out.splitlines() if ln.startswith(("a.bvh", "b.bvh", "c.bvh"))]
    assert len(rows) == 3
    for row in rows:
        assert re.search(r"missed +39 +missed by [0-9.]+ m \(tolerance [0-9.e+-]+ m\) +[0-9]+\.[0-9]{2}$", row), row


# ------------------------------------------------------ 6. FK warmed up first
def test_bench_yardstick_times_a_warm_forward_kinematics(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """FK runs once on the timed clip before it is timed (a cold numba cache put its compile in the timed row; a
    warm-up on a short clip would not do: FK's parallel driver, compiled apart, runs only for large inputs)."""
    from kinema import fk
    from kinema.cli import _bench

    calls: list[tuple[bool, int]] = []  # (inside a timed run, frames)
    timing = [False]
    real_fk, real_best = fk.forward_kinematics, _bench._best

    def recorded_fk(skeleton: Any, pose: Any, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_filename == _bench.__file__:  # the bench's own calls (not footlock's)
            calls.append((timing[0], int(pose.translations.shape[0])))
        return real_fk(skeleton, pose, *args, **kwargs)

    def timed(fn: Any, repeat: int) -> float:
        timing[0] = True
        try:
            return float(real_best(fn, repeat))
        finally:
            timing[0] = False

    monkeypatch.setattr(fk, "forward_kinematics", recorded_fk)
    monkeypatch.setattr(_bench, "_best", timed)
    code, out, err = run(capsys, "bench", "--frames", "2000", "--repeat", "2")
    assert code == 0, err
    assert "forward kinematics of the same clip (yardstick)" in out
    timed_calls = [n for inside, n in calls if inside]
    assert len(timed_calls) == 2 and calls[0][0] is False  # warmed before, then timed twice
    assert calls[0][1] == timed_calls[0] == timed_calls[1]  # on the timed clip itself (the same FK driver)
    assert calls[0][1] * 15 >= FK_PARALLEL_MIN_JOINTS  # a clip that takes the parallel driver (15 joints)
