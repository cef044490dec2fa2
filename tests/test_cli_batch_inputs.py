"""``kinema batch`` and its inputs: special files, external buffers, outputs that are inputs, a dead worker.

* a FIFO or a device among the inputs fails that file at once with the single
  commands' one-line error (local pool and Dask); the other files go on;
* a .gltf whose buffer is a file beside it converts as ``kinema convert`` does,
  on Dask too (byte for byte, with the same errors), and no batch replaces a
  buffer file with an output;
* ``-q`` on Dask prints nothing (no "large graph" warning);
* an output that is any job's input is refused, even with ``--force``;
* a pool worker killed mid-batch fails its files ("worker failed"); the rest
  run on a fresh pool and the summary table prints.

Processes are found through ``/proc`` (Linux), no psutil.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kinema
from kinema.cli import main
from kinema.cli._bench import long_walk
from kinema.io import load_bvh, load_gltf, save_bvh, save_gltf
from test_cli_kill import _alive, _stat  # /proc readers of the kill tests

CLI = [sys.executable, "-m", "kinema.cli"]

#: Largest file a batch run by these tests may write: a batch that streams /dev/zero into a file fails fast.
FILE_SIZE_LIMIT = 256 << 20

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc (Linux)")


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> dict[str, list[str]]:
    """The batch table's rows by file name (the first column)."""
    return {ln.split()[0]: ln.split() for ln in out.splitlines()
            if ln.split() and ln.split()[0].endswith((".bvh", ".gltf"))}


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def _kinema_temps(work: Path) -> list[Path]:
    return [p for p in work.iterdir() if p.name.startswith("kinema-")]


def _batch(argv: list[object], work: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "batch", *[str(a) for a in argv]], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, TMPDIR=str(work), **env), preexec_fn=_limit_file_size)


# ----------------------------------------------------------- special files
@pytest.fixture
def special_inputs(tmp_path: Path) -> Path:
    """a.bvh (a walk), f.bvh (a FIFO) and z.bvh (a symlink to /dev/zero)."""
    folder = tmp_path / "in"
    folder.mkdir()
    save_bvh(folder / "a.bvh", kinema.samples.humanoid(), kinema.samples.clip("walk"))
    os.mkfifo(folder / "f.bvh")
    (folder / "z.bvh").symlink_to("/dev/zero")
    return folder


def _assert_special_files_refused(res: subprocess.CompletedProcess[str], out_dir: Path, work: Path) -> None:
    assert res.returncode == 1, res.stderr
    rows = _rows(res.stdout)
    assert rows["a.bvh"][1] == "ok"
    assert rows["f.bvh"][1] == "FAILED" and "f.bvh: 'f.bvh' is a FIFO; only regular files are read" in res.stdout
    assert rows["z.bvh"][1] == "FAILED"
    assert "z.bvh: 'z.bvh' is a character device; only regular files are read" in res.stdout
    assert "1 ok, 0 missed, 2 failed, 0 skipped" in res.stdout
    assert "kinema batch: f.bvh: " in res.stderr and "kinema batch: z.bvh: " in res.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.glb"]
    assert _kinema_temps(work) == []


@linux_only
def test_pool_batch_refuses_a_fifo_and_a_device(special_inputs: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    res = _batch(["convert", special_inputs, "-o", tmp_path / "out", "--to", "glb", "--workers", "2"], work, 120)
    assert "local pool, 2 workers" in res.stdout
    _assert_special_files_refused(res, tmp_path / "out", work)


@linux_only
def test_dask_batch_refuses_a_fifo_and_a_device(special_inputs: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    work = tmp_path / "work"
    work.mkdir()
    res = _batch(["convert", special_inputs, "-o", tmp_path / "out", "--to", "glb", "--dask", "local"], work, 300)
    assert "dask LocalCluster, 2 workers" in res.stdout
    _assert_special_files_refused(res, tmp_path / "out", work)


# -------------------------------------------------------- external buffers
def _gltf_with_external_buffer(gltf: Path, uri: str, buffer_file: Path | None = None) -> None:
    """A walk saved as ``gltf`` whose buffer is the file ``uri`` names, written at ``buffer_file`` (default: the
    uri, percent-decoded, beside ``gltf``)."""
    from urllib.parse import unquote

    gltf.parent.mkdir(parents=True, exist_ok=True)
    save_gltf(gltf, kinema.samples.humanoid(), {"walk": kinema.samples.clip("walk")}, mesh=False)
    doc = json.loads(gltf.read_text())
    buffer_file = buffer_file or gltf.parent / unquote(uri)
    buffer_file.parent.mkdir(parents=True, exist_ok=True)
    buffer_file.write_bytes(base64.b64decode(doc["buffers"][0]["uri"].split(",", 1)[1]))
    doc["buffers"][0]["uri"] = uri
    gltf.write_text(json.dumps(doc))


def test_batch_reads_a_gltf_with_an_external_buffer_as_convert_does(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    folder = tmp_path / "in2"
    gltf = folder / "ext_ok.gltf"
    _gltf_with_external_buffer(gltf, "ok.bin")
    code, out, err = run(capsys, "batch", "convert", folder, "-o", tmp_path / "out2", "--to", "glb", "--workers", "1")
    assert code == 0, err
    assert "1 ok, 0 missed, 0 failed, 0 skipped" in out
    code, _, err = run(capsys, "convert", gltf, tmp_path / "single.glb")
    assert code == 0, err
    assert (tmp_path / "out2" / "ext_ok.glb").read_bytes() == (tmp_path / "single.glb").read_bytes()


def test_dask_batch_reads_external_buffers_as_the_serial_batch_does(tmp_path: Path) -> None:
    """Dask workers get a .gltf's external buffers with it (read once, here, under the loader's rules): the same
    outputs, byte for byte, and the same errors as the serial batch; no route replaces a buffer file."""
    pytest.importorskip("distributed")
    folder, work = tmp_path / "in", tmp_path / "work"
    out = folder / "o"  # inside the input folder (a batch does not read it)
    work.mkdir()
    _gltf_with_external_buffer(folder / "ext.gltf", "ext.bin")
    _gltf_with_external_buffer(folder / "sub.gltf", "bufs/sub%20data.bin")  # percent-encoded, in a subfolder
    _gltf_with_external_buffer(folder / "escape.gltf", "../outside.bin", tmp_path / "outside.bin")
    _gltf_with_external_buffer(folder / "own.gltf", "o/own.glb")  # its buffer is where its output goes
    own_buffer = (out / "own.glb").read_bytes()
    outputs, errors = {}, {}
    for engine in ("--workers", "1"), ("--dask", "local"):
        res = _batch(["convert", folder, "-o", out, "--to", "glb", "--force", *engine], work, 300)
        assert res.returncode == 1, res.stderr
        assert "2 ok, 0 missed, 2 failed, 0 skipped" in res.stdout, res.stdout + res.stderr
        assert ("kinema batch: escape.gltf: escape.gltf at buffers[0].uri: '../outside.bin' resolves outside the "
                "asset's folder") in res.stderr
        assert (f"kinema batch: own.gltf: cannot write the output: {out / 'own.glb'}: refusing to overwrite an "
                "input file") in res.stderr
        assert (out / "own.glb").read_bytes() == own_buffer
        assert sorted(p.name for p in out.iterdir()) == ["ext.glb", "own.glb", "sub.glb"]
        outputs[engine[0]] = {name: (out / name).read_bytes() for name in ("ext.glb", "sub.glb")}
        errors[engine[0]] = sorted(res.stderr.splitlines())
        assert _kinema_temps(work) == []
    assert outputs["--dask"] == outputs["--workers"]
    assert errors["--dask"] == errors["--workers"]
    assert load_gltf(out / "ext.glb").clips["walk"].n_frames == 39


def test_a_quiet_dask_batch_prints_nothing(tmp_path: Path) -> None:
    """-q: no "large graph" warning from Dask (the input's bytes are scattered, not put in the task graph); the
    threshold is lowered to 1 kB so that a small file would trigger it."""
    pytest.importorskip("distributed")
    folder, work = tmp_path / "in", tmp_path / "work"
    folder.mkdir()
    work.mkdir()
    save_bvh(folder / "walk.bvh", kinema.samples.humanoid(), kinema.samples.clip("walk"))
    assert (folder / "walk.bvh").stat().st_size > 1000
    res = _batch(["convert", folder, "-o", tmp_path / "out", "--dask", "local", "-q"], work, 300,
                 DASK_DISTRIBUTED__ADMIN__LARGE_GRAPH_WARNING_THRESHOLD="1kB")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert load_bvh(tmp_path / "out" / "walk.bvh")[1].n_frames == 39
    assert list(work.iterdir()) == []  # Dask's scratch space was in the batch's temporary folder


def test_a_local_dask_cluster_runs_one_numba_thread_per_worker() -> None:
    """The workers are the parallelism (as the local pool's): each runs kinema's parallel kernels on one numba
    thread, not one per core (two workers of two threads each oversubscribe a 2-core machine)."""
    pytest.importorskip("distributed")
    from kinema.cli._batch import _Dask

    session = _Dask("local", 2, 60.0)
    try:
        threads = session._client.run(lambda: __import__("numba").get_num_threads())
    finally:
        session.close(cancel=True)
    assert len(threads) == 2
    assert set(threads.values()) == {1}


# ------------------------------------------------------ outputs and inputs
def test_batch_never_overwrites_another_jobs_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    (cap / "x" / "x").mkdir(parents=True)
    save_bvh(cap / "x" / "a.bvh", kinema.samples.humanoid(), kinema.samples.clip("walk"))
    code, _, err = run(capsys, "convert", cap / "x" / "a.bvh", cap / "x" / "x" / "a.bvh", "--scale", "0.5")
    assert code == 0, err
    before = (cap / "x" / "a.bvh").read_bytes()
    # the output folder is above the input folder: x/a.bvh's output is cap/x/a.bvh, the input of a.bvh
    code, out, err = run(capsys, "batch", "convert", cap / "x", "-o", cap, "--recursive", "--force", "--workers", "1")
    assert code == 1
    assert (cap / "x" / "a.bvh").read_bytes() == before
    rows = _rows(out)
    assert rows[os.path.join("x", "a.bvh")][1] == "FAILED" and rows["a.bvh"][1] == "ok"
    assert f"refusing to overwrite {cap / 'x' / 'a.bvh'}: it is the input a.bvh" in err
    assert "1 ok, 0 missed, 1 failed, 0 skipped" in out
    assert load_bvh(cap / "a.bvh")[1].n_frames == 39


# -------------------------------------------------------------- dead worker
def _pool_workers(pid: int) -> list[int]:
    """The spawned pool workers among ``pid``'s children (not multiprocessing's resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (_stat(int(entry)) or ["", ""])[1] == str(pid):
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
                found.append(int(entry))
    return found


@linux_only
def test_a_killed_pool_worker_fails_its_files_and_the_batch_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "walks"
    folder.mkdir()
    sk, clip = long_walk(20_000)
    save_bvh(folder / "take0.bvh", sk, clip)
    for i in range(1, 6):
        os.link(folder / "take0.bvh", folder / f"take{i}.bvh")
    out_dir, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([*CLI, "batch", "footlock", str(folder), "-o", str(out_dir), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(work)))
    try:
        t0 = time.monotonic()
        while True:  # both workers have a file: mid-batch
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 300, "the batch did not start"
            roots = [p for p in work.iterdir() if p.name.startswith("kinema-batch-") and p.is_dir()]
            workers = _pool_workers(proc.pid)
            if len(workers) == 2 and sum(len(list(r.iterdir())) for r in roots) >= 2:
                break
            time.sleep(0.01)
        os.kill(workers[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    summary = re.search(r"(\d+) ok, 0 missed, (\d+) failed, 0 skipped", out)
    assert summary is not None, out + err
    ok, failed = int(summary.group(1)), int(summary.group(2))
    assert ok >= 1 and failed >= 1 and ok + failed == 6, out
    assert "worker failed: " in out and "kinema batch: take" in err
    rows = _rows(out)
    done = sorted(name for name, row in rows.items() if row[1] == "ok")
    assert sorted(p.name for p in out_dir.iterdir()) == done
    for name in done:
        assert load_bvh(out_dir / name)[1].n_frames == 20_000
    assert _kinema_temps(work) == []
    assert not [p for p in workers if _alive(p)]


def test_a_batch_removes_the_work_folders_of_batches_killed_outright(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL leaves a batch's work folder behind (nothing runs to remove it); the next batch removes every such
    folder whose batch is no longer running, and nothing else: not a running batch's, not a file or a link of
    that name, not another program's folder."""
    import tempfile

    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no running process now
    stale = work / f"kinema-batch-{dead.pid}-abc123"
    (stale / "kinema-batch-x").mkdir(parents=True)
    (stale / "kinema-batch-x" / "out.bvh").write_text("half a file")
    alive = work / f"kinema-batch-{os.getppid()}-def456"  # pytest's parent: running
    alive.mkdir()
    dead_file = work / f"kinema-batch-{dead.pid}-file"
    dead_file.write_text("not a folder")
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / f"kinema-batch-{dead.pid}-link").symlink_to(outside, target_is_directory=True)
    other = work / "kinema-batch-old"  # no pid: not ours to judge
    other.mkdir()
    folder = tmp_path / "in"
    folder.mkdir()
    save_bvh(folder / "walk.bvh", kinema.samples.humanoid(), kinema.samples.clip("walk"))
    code, _, err = run(capsys, "batch", "convert", folder, "-o", tmp_path / "out", "--workers", "1")
    assert code == 0, err
    assert not stale.exists()
    assert alive.is_dir() and dead_file.is_file() and outside.is_dir() and other.is_dir()
    assert (work / f"kinema-batch-{dead.pid}-link").is_symlink()
    assert sorted(p.name for p in work.iterdir()) == sorted(
        [alive.name, dead_file.name, f"kinema-batch-{dead.pid}-link", other.name])  # this batch's own is gone too


@linux_only
def test_dask_local_starts_no_more_workers_than_files(tmp_path: Path) -> None:
    """``--dask local --workers 64`` for two files starts two workers, as the local pool would (it started 64
    processes, 35 s on two cores for nine tiny files; 100000 ran out of file descriptors and hung)."""
    pytest.importorskip("distributed")
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.bvh", "b.bvh"):
        save_bvh(folder / name, kinema.samples.humanoid(), kinema.samples.clip("walk"))
    work = tmp_path / "work"
    work.mkdir()
    res = _batch(["convert", folder, "-o", tmp_path / "out", "--to", "glb", "--dask", "local", "--workers", "64"],
                 work, 300)
    assert res.returncode == 0, res.stderr
    assert "dask LocalCluster, 2 workers" in res.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.glb", "b.glb"]
