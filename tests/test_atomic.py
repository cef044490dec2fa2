"""The atomic writer every kinema saver uses: all or nothing, inputs never overwritten."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kinema.io._atomic import atomic_write, same_file


def test_writes_bytes_and_text(tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    with atomic_write(p) as f:
        f.write(b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    with atomic_write(p, mode="w") as f:
        f.write("héllo\n")
    assert p.read_bytes() == "héllo\n".encode()
    assert os.listdir(tmp_path) == ["a.bin"]


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path, exc: BaseException) -> None:
    p = tmp_path / "keep.txt"
    p.write_text("old")
    with pytest.raises(type(exc)):
        with atomic_write(p, mode="w") as f:
            f.write("new, half written")
            raise exc
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_failure_on_a_new_path_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        with atomic_write(tmp_path / "new.txt", mode="w") as f:
            f.write("x")
            raise ValueError
    assert os.listdir(tmp_path) == []


def test_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    src = tmp_path / "in.bvh"
    src.write_text("input")
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.bvh"
    link.symlink_to(src)
    for spelling in (src, tmp_path / "sub" / ".." / "in.bvh", link):
        with pytest.raises(FileExistsError, match="input"):
            with atomic_write(spelling, mode="w", inputs=[src]) as f:
                f.write("clobbered")
    assert src.read_text() == "input"
    assert same_file(link, src) and not same_file(tmp_path / "other", src)


def test_overwrite_false(tmp_path: Path) -> None:
    p = tmp_path / "x"
    p.write_text("old")
    with pytest.raises(FileExistsError):
        with atomic_write(p, overwrite=False) as f:
            f.write(b"new")
    assert p.read_text() == "old"
    with atomic_write(tmp_path / "y", overwrite=False) as f:  # a new path is fine
        f.write(b"ok")
    assert (tmp_path / "y").read_bytes() == b"ok"


def test_keeps_permissions_and_symlinks(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with atomic_write(link, mode="w") as f:
        f.write("new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(tmp_path / "x", mode="a"):
            pass
    with pytest.raises(FileNotFoundError):
        with atomic_write(tmp_path / "missing" / "x"):
            pass
    with pytest.raises(IsADirectoryError):
        with atomic_write(tmp_path):
            pass


@pytest.mark.skipif(os.name != "posix", reason="process ids are checked with POSIX kill(pid, 0)")
def test_temp_files_of_dead_writers_are_removed_by_the_next_write(tmp_path: Path) -> None:
    import subprocess
    import sys

    from kinema.io._atomic import is_temp_name, remove_stale_temps

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # exited (and reaped): no such process now
    stale = tmp_path / f".out.bvh.{dead_pid}-0123456789abcdef.tmp"
    live = tmp_path / f".out.bvh.{os.getppid()}-0123456789abcdef.tmp"  # a running writer's file stays
    other = tmp_path / f".notes.{dead_pid}.tmp"  # not one of ours (no random part)
    link = tmp_path / f".x.bvh.{dead_pid}-fedcba9876543210.tmp"
    for p in (stale, live, other):
        p.write_text("partial")
    link.symlink_to(tmp_path / "elsewhere")  # only regular files are removed
    assert is_temp_name(stale.name) and is_temp_name(live.name) and not is_temp_name(other.name)
    with atomic_write(tmp_path / "new.bvh", mode="w") as f:
        assert not stale.exists()  # removed before this write began
        mine = [p.name for p in tmp_path.iterdir() if p.name.startswith(".new.bvh.")]
        assert len(mine) == 1 and is_temp_name(mine[0]) and f".{os.getpid()}-" in mine[0]
        f.write("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, link.name, "new.bvh"])
    assert remove_stale_temps(tmp_path) == []


def test_a_destination_that_is_not_a_regular_file_is_never_replaced(tmp_path: Path) -> None:
    """A FIFO (or a device) at the destination, or behind a symlink there (``out.bvh -> /dev/null`` with --force,
    as root, would have replaced /dev/null with a file), is refused before anything is written and left as it is."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "out.bvh"
    link.symlink_to(fifo)
    for dest in (fifo, link):
        with pytest.raises(FileExistsError, match="FIFO"):
            with atomic_write(dest) as f:
                f.write(b"data")
        assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bvh", "pipe"]  # no temporary file left


@pytest.mark.skipif(os.name != "posix", reason="tells dead processes by their ids (POSIX)")
def test_work_folders_of_killed_commands_go_with_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command killed outright (SIGKILL: ``kinema bench`` in tests/test_bench_suite.py) cannot remove its work
    folder; the next command of its kind does, and never a running command's, another kind's or a link."""
    import subprocess
    import sys
    import tempfile

    from kinema.io._atomic import make_work_folder, work_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"kinema-bench-{dead.pid}-abc_12"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "walk_50.bvh").write_text("x")
    alive = tmp_path / f"kinema-bench-{os.getppid()}-running"  # the parent of this test runs
    alive.mkdir()
    other = tmp_path / f"kinema-batch-{dead.pid}-abc_12"  # another kind's: its own commands clean it
    other.mkdir()
    link = tmp_path / f"kinema-bench-{dead.pid}-link_1"
    link.symlink_to(alive)
    with work_folder("bench") as folder:
        assert Path(folder).parent == tmp_path and Path(folder).name.startswith(f"kinema-bench-{os.getpid()}-")
        assert not stale.exists() and alive.is_dir() and other.is_dir() and link.is_symlink()
        (Path(folder) / "walk_5000.bvh").write_text("y")
    assert not Path(folder).exists()  # removed with what it held
    # one made without the context manager stays while this process runs
    kept = Path(make_work_folder("bench"))
    with work_folder("bench"):
        assert kept.is_dir()
