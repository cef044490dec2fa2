"""``kinema batch`` and the single commands under faults and kills (issue 15.4, 15.5).

* an output that cannot be written (a folder or a symlink in its place, a
  read-only folder, a full disk) fails that file only; the batch goes on and
  ends with its summary and exit status 1;
* SIGTERM to a running batch (local pool or Dask LocalCluster) stops its
  workers and removes its temporary folder (exit 143), and so does Ctrl-C
  (SIGINT to the whole process group, exit 130), printing one line and no
  worker's traceback; SIGKILL cannot leave pool workers running (they watch
  their parent) nor their temporary folders;
* a single command killed mid-write leaves its ``.tmp`` file only until the
  next write into that folder.

Processes are found through ``/proc`` (Linux), no psutil.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import kinema
from kinema.cli import main
from kinema.cli._bench import long_walk
from kinema.io import load_bvh, save_bvh
from kinema.io._atomic import is_temp_name

CLI = [sys.executable, "-m", "kinema.cli"]

#: Seconds a killed batch's workers get to be gone (a thread in each waits on the parent's sentinel pipe).
WORKERS_GONE_S = 5.0

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc (Linux)")


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def two_walks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("walks")
    sk = kinema.samples.humanoid()
    for name in ("a", "b", "c"):
        save_bvh(folder / f"{name}.bvh", sk, kinema.samples.clip("walk"))
    return folder


def _rows(out: str) -> dict[str, list[str]]:
    """The batch table's rows by file name (the first column)."""
    return {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0].endswith(".bvh")}


# ---------------------------------------------------------- failed outputs
def test_an_output_that_cannot_be_written_fails_that_file_only(capsys: pytest.CaptureFixture[str], two_walks: Path,
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "a.bvh").mkdir()  # a folder where a.bvh goes
    elsewhere = tmp_path / "elsewhere.bvh"
    (out_dir / "b.bvh").symlink_to(elsewhere)  # a dangling link where b.bvh goes
    code, out, err = run(capsys, "batch", "footlock", two_walks, "-o", out_dir, "--workers", "1", "--force")
    assert code == 1
    rows = _rows(out)
    assert rows["a.bvh"][1] == "FAILED" and "is a folder" in out
    assert rows["b.bvh"][1] == "FAILED" and "is a symlink" in out
    assert rows["c.bvh"][1] == "ok"
    assert "1 ok, 0 missed, 2 failed, 0 skipped" in out
    assert not elsewhere.exists()  # never written through the link
    assert load_bvh(out_dir / "c.bvh")[1].n_frames == 39
    assert "a.bvh" in err and "b.bvh" in err
    # a full disk while writing one output: that file fails (naming the file), the rest go on
    import kinema.io._atomic as atomic

    real = atomic._open_temp

    def full_disk(folder: str, name: str, claim: Callable[[str], None]) -> int:
        if name == "b.bvh":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(folder, name))
        return real(folder, name, claim)

    monkeypatch.setattr(atomic, "_open_temp", full_disk)
    out2 = tmp_path / "out2"
    code, out, err = run(capsys, "batch", "footlock", two_walks, "-o", out2, "--workers", "1")
    assert code == 1
    assert "2 ok, 0 missed, 1 failed, 0 skipped" in out
    assert f"{out2 / 'b.bvh'}: No space left on device" in err
    assert sorted(p.name for p in out2.iterdir()) == ["a.bvh", "c.bvh"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write into read-only folders")
def test_a_read_only_output_folder_fails_each_file(capsys: pytest.CaptureFixture[str], two_walks: Path,
                                                   tmp_path: Path) -> None:
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    out_dir.chmod(0o555)
    try:
        code, out, _ = run(capsys, "batch", "footlock", two_walks, "-o", out_dir, "--workers", "1")
    finally:
        out_dir.chmod(0o755)
    assert code == 1 and "0 ok, 0 missed, 3 failed, 0 skipped" in out and "Permission denied" in out


# ------------------------------------------------------------------ missed
def test_batch_reports_missed_files_with_the_distance(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    sk = kinema.samples.humanoid()
    save_bvh(src / "walk.bvh", sk, kinema.samples.clip("walk"))
    save_bvh(src / "run.bvh", sk, kinema.samples.clip("run"))
    # Without the hips the walk's feet fall 3.1 cm short, the run's 0.26 cm: a 1 cm tolerance splits them.
    code, out, _ = run(capsys, "batch", "footlock", src, "-o", tmp_path / "out", "--workers", "1", "--no-hips",
                       "--no-keep-length", "--tolerance", "0.01")
    assert code == 3
    rows = _rows(out)
    assert rows["walk.bvh"][1] == "missed" and rows["run.bvh"][1] == "ok"
    line = next(ln for ln in out.splitlines() if ln.startswith("walk.bvh"))
    assert "missed by 0.03097 m (tolerance 0.01 m)" in line
    assert "1 ok, 1 missed, 0 failed, 0 skipped" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run.bvh", "walk.bvh"]  # written anyway
    # a failure outranks a miss
    (src / "broken.bvh").write_text("HIERARCHY\n")
    code, out, _ = run(capsys, "batch", "footlock", src, "-o", tmp_path / "out", "--workers", "1", "--no-hips",
                       "--no-keep-length", "--tolerance", "0.01", "--force")
    assert code == 1 and "1 ok, 1 missed, 1 failed, 0 skipped" in out


def test_single_footlock_miss_exits_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "footlock", "--sample", "walk", "-o", tmp_path / "x.bvh", "--no-hips",
                         "--no-keep-length")
    assert code == 3
    assert "missed: a foot ends 0.03097 m from its target" in out
    assert err.startswith("kinema footlock: missed: a foot ends 0.03097 m") and "exit status 3" in err
    code, _, _ = run(capsys, "footlock", "--sample", "walk", "-o", tmp_path / "x.bvh", "--no-hips",
                     "--no-keep-length", "--force", "--tolerance", "0.05")
    assert code == 0


# ------------------------------------------------------------------- kills
@pytest.fixture(scope="module")
def long_walks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six 40,000-frame walks (18 MB each, hard links of one file): a batch that runs for seconds."""
    folder = tmp_path_factory.mktemp("long_walks")
    sk, clip = long_walk(40_000)
    save_bvh(folder / "take0.bvh", sk, clip)
    for i in range(1, 6):
        os.link(folder / "take0.bvh", folder / f"take{i}.bvh")
    return folder


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields after "pid (comm)": state, ppid, ...


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        kids = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None and int(st[1]) in frontier:
                    kids.add(int(entry))
        kids -= found
        found |= kids
        frontier = kids
    return found


#: The engines a kill test runs: the local pool, and a Dask LocalCluster (its workers keep their files in the
#: batch's temporary folder too).
ENGINES = [pytest.param(("--workers", "2"), id="pool"), pytest.param(("--dask", "local"), id="dask")]


def _start_batch(long_walks: Path, tmp_path: Path,
                 engine: tuple[str, ...] = ("--workers", "2")) -> tuple[subprocess.Popen[str], Path, Path, set[int]]:
    """A batch on ``engine``, in a session (process group) of its own, once both its workers are mid-file."""
    if "--dask" in engine:
        pytest.importorskip("distributed")
    out_dir, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, TMPDIR=str(work))
    proc = subprocess.Popen([*CLI, "batch", "footlock", str(long_walks), "-o", str(out_dir), *engine],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    t0 = time.monotonic()
    while True:  # wait until both workers have a file in their temporary folders: mid-batch
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300, "the batch did not start"
        busy = [d for root in _batch_folders(work) for d in root.iterdir() if d.name.startswith("kinema-batch-")]
        if len(busy) >= 2:
            break
        time.sleep(0.01)
    return proc, out_dir, work, _descendants(proc.pid)


def _assert_all_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + WORKERS_GONE_S
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "a batch process survived its parent"


def _batch_folders(work: Path) -> list[Path]:
    """The batch's temporary folders in ``work`` (TMPDIR); other libraries' passing files are not its own."""
    return [p for p in work.iterdir() if p.name.startswith("kinema-batch-") and p.is_dir()]


def _left_behind(out_dir: Path, work: Path) -> list[Path]:
    """Partial outputs in ``out_dir``, and the batch's (or Dask's) temporary folders in ``work`` (TMPDIR)."""
    temps = [p for p in out_dir.iterdir() if is_temp_name(p.name)] if out_dir.exists() else []
    return temps + [p for p in work.iterdir() if p.name.startswith(("kinema-", "dask-scratch-space"))]


#: How a batch is stopped: SIGTERM to the batch alone, or Ctrl-C at a terminal, which sends SIGINT to the whole
#: process group (the workers too: none may print a traceback).
STOPS = [pytest.param(signal.SIGTERM, False, id="sigterm"), pytest.param(signal.SIGINT, True, id="ctrl-c")]


@linux_only
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("signum", "to_group"), STOPS)
def test_sigterm_and_ctrl_c_stop_a_batch_its_workers_and_its_temporary_folder(long_walks: Path, tmp_path: Path,
                                                                             engine: tuple[str, ...], signum: int,
                                                                             to_group: bool) -> None:
    proc, out_dir, work, kids = _start_batch(long_walks, tmp_path, engine)
    assert len(kids) >= 2
    if to_group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert err == "kinema: interrupted (no partial output was left)\n"  # one line: no worker's traceback
    _assert_all_gone(kids)
    assert _left_behind(out_dir, work) == []
    for p in out_dir.iterdir() if out_dir.exists() else []:  # whatever was installed is complete
        assert load_bvh(p)[1].n_frames == 40_000


@linux_only
def test_sigkill_of_a_batch_leaves_no_worker_and_no_temporary_folder(long_walks: Path, tmp_path: Path) -> None:
    proc, out_dir, work, kids = _start_batch(long_walks, tmp_path)
    assert len(kids) >= 2
    proc.kill()
    proc.communicate(timeout=60)
    _assert_all_gone(kids)
    deadline = time.monotonic() + WORKERS_GONE_S
    while _left_behind(out_dir, work) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _left_behind(out_dir, work) == []


@linux_only
def test_a_killed_writer_leaves_its_temp_file_only_until_the_next_write(long_walks: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "locked.bvh"
    proc = subprocess.Popen([*CLI, "convert", str(long_walks / "take0.bvh"), str(out_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not [p for p in tmp_path.iterdir() if is_temp_name(p.name)]:  # mid-write
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300
        time.sleep(0.002)
    proc.kill()
    proc.communicate(timeout=60)
    stale = [p for p in tmp_path.iterdir() if is_temp_name(p.name)]
    assert len(stale) == 1 and not out_path.exists()  # SIGKILL: nothing can clean up in that process
    code = main(["sample", "walk", "-o", str(tmp_path / "walk.bvh")])  # the next write into the folder
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["walk.bvh"]


@linux_only
def test_sigterm_of_a_writer_leaves_nothing(long_walks: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "copy.bvh"
    proc = subprocess.Popen([*CLI, "convert", str(long_walks / "take0.bvh"), str(out_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not [p for p in tmp_path.iterdir() if is_temp_name(p.name)]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert list(tmp_path.iterdir()) == []


def _numba_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def test_pool_workers_run_numba_on_one_thread() -> None:
    """The pool is the parallelism: each spawned worker runs numba single-threaded (no oversubscription)."""
    import multiprocessing
    import os as _os
    from concurrent.futures import ProcessPoolExecutor

    from kinema.cli._worker import worker_init

    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                             initializer=worker_init, initargs=(_os.getpid(), None)) as ex:
        assert list(ex.map(lambda_free_threads, range(2))) == [1, 1]


def lambda_free_threads(_: int) -> int:
    return _numba_threads()


def test_bench_batch_separates_the_pool_start_up(capsys) -> None:  # type: ignore[no-untyped-def]
    """kinema bench --batch says what its worker figures are: the pool's start-up on its own, and the
    two-worker throughput past it (which is what more workers buy on a long batch)."""
    import re

    from kinema.cli._bench import _batch_scaling
    from kinema.cli._ui import UI

    rows, note = _batch_scaling(UI(quiet=True, progress=False), 1)
    names = [r[0] for r in rows]
    assert names == ["batch footlock, 8 files x 20000 frames, 1 worker(s)",
                     "batch footlock, 8 files x 20000 frames, 2 worker(s)",
                     "batch start-up: 2 workers on 2 tiny files"]
    startup = float(rows[2][1].split()[0])
    two = float(rows[1][1].split()[0])
    assert 0.0 < startup < two
    assert "runs in this process" in note and f"{startup:.2f} s" in note
    past = re.search(r"past their start-up did ([0-9,]+) frames/s", note)
    # the printed times are rounded to 0.01 s: the throughput agrees with them to that rounding
    lo, hi = 160_000 / (two - startup + 0.01), 160_000 / max(two - startup - 0.01, 1e-9)
    assert past is not None and lo <= int(past.group(1).replace(",", "")) <= hi


def test_an_engine_error_after_a_signal_is_reported_as_the_signal(tmp_path: Path) -> None:
    """A SIGTERM to the whole group stops the Dask workers too, and their end could reach the batch first as the
    engine's own error ("Futures cancelled", a closed connection: status 1 with Dask's message, 3 runs of 6):
    after a signal the batch ends as interrupted (an ``Interrupted`` for exit status 143), whatever the engine
    raised; without a signal the engine's error is what it is."""
    from kinema.cli import _batch
    from kinema.cli._files import Interrupted
    from kinema.cli._ui import UI

    class Failing(_batch._Interruptible):
        name, n_workers, work_root, ships_bytes = "failing engine", 1, None, False

        def __init__(self, signalled: bool) -> None:
            super().__init__()
            self.signalled = signalled

        def submit(self, fn: Callable[..., object], *args: object) -> object:
            if self.signalled:
                self._on_signal(signal.SIGTERM, None)  # the handler ran as the workers died
            raise RuntimeError("2 Futures cancelled")

        def close(self, cancel: bool) -> None:
            pass

    src = tmp_path / "a.bvh"
    save_bvh(src, kinema.samples.humanoid(), kinema.samples.clip("walk"))
    job = _batch.Job("a.bvh", str(src), str(tmp_path / "out" / "a.bvh"))
    for signalled, expected in ((True, Interrupted), (False, RuntimeError)):
        with pytest.raises(expected) as info:
            _batch._run_jobs("convert", [], [job], Failing(signalled), None, {}, UI(quiet=True))  # type: ignore[arg-type]
        if signalled:
            assert info.value.args == Interrupted(signal.SIGTERM).args
