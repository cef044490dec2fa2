"""Small fixes to the ``kinema`` command line: a closed stdout, Ctrl-C while importing, Dask's dashboard port,
the BVH parser's end-of-file messages, batch and convert messages, the ``bench --quick`` claim."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import kinema
from _cli import one_error_line, run
from kinema.errors import FileFormatError
from kinema.io import load_bvh, save_bvh

CLI = [sys.executable, "-m", "kinema.cli"]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs and /proc: Linux")


@pytest.fixture(scope="module")
def bvh_path(shared_data: Path) -> Path:
    return shared_data / "bvh" / "bvhtools-test2.bvh"


def _with_first_value(src: Path, dst: Path, value: str) -> Path:
    """``src`` with the first number of its first frame replaced by ``value``."""
    text = src.read_text()
    head, motion = text.split("MOTION", 1)
    lines = motion.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.lower().startswith("frame time")) + 1
    values = lines[k].split()
    values[0] = value
    lines[k] = " ".join(values)
    dst.write_text(head + "MOTION" + "\n".join(lines))
    return dst


# ------------------------------------------------------------ 1. closed stdout
def test_a_closed_stdout_ends_quietly_with_status_0(bvh_path: Path) -> None:
    """``kinema info F | head -1``: the reader is gone before kinema writes (it writes after its imports)."""
    for extra in ([], ["--json"]):
        p = subprocess.Popen([*CLI, "info", str(bvh_path), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0, err
        assert err == ""


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from kinema.cli import _commands

    def broken(*args: object) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(_commands, "run_info", broken)
    code, _, err = run(capsys, "info", "x.bvh")
    assert code == 1 and one_error_line(err) == "kinema: error: Broken pipe"


# ------------------------------------------------------ 2. Ctrl-C in imports
def test_ctrl_c_while_importing_is_interrupted_130() -> None:
    """The console script does ``from kinema.cli import main; sys.exit(main())``; a KeyboardInterrupt while the
    command's modules import (here raised by an import hook, as Ctrl-C would be) is one line and status 130."""
    script = (
        "import sys\n"
        "class Hook:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'kinema.cli._commands':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Hook())\n"
        "from kinema.cli import main\n"
        "sys.exit(main(['info', 'x.bvh']))\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stderr) == (130, "kinema: interrupted\n")


# ------------------------------------------------- 3. Dask's dashboard port
@pytest.fixture
def port_8787_taken() -> Iterator[None]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 8787))
        s.listen()
    except OSError:
        pass  # in use already: as well
    try:
        yield
    finally:
        s.close()


@linux_only
def test_dask_local_batch_is_quiet_with_port_8787_taken_and_words_errors_as_the_pool(
        port_8787_taken: None, tmp_path: Path, bvh_path: Path) -> None:
    pytest.importorskip("distributed")
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(bvh_path, folder / "ok.bvh")
    (folder / "broken.bvh").symlink_to(tmp_path / "nowhere.bvh")
    os.mkfifo(folder / "x.bvh")
    errors = {}
    for engine in (["--workers", "1"], ["--dask", "local"]):
        res = subprocess.run([*CLI, "batch", "convert", str(folder), "-o", str(tmp_path / engine[0].strip("-")),
                              "--to", "glb", "-q", *engine], capture_output=True, text=True, timeout=300)
        assert res.returncode == 1, res.stderr
        errors[engine[0]] = res.stderr
    assert errors["--dask"] == errors["--workers"]
    assert sorted(errors["--dask"].splitlines()) == [
        "kinema batch: broken.bvh: no such file",
        "kinema batch: x.bvh: is a FIFO; only regular files are read",
    ]


# ------------------------------------------------- 4. BVH end-of-file messages
@pytest.mark.parametrize(("text", "line", "expected"), [
    ("", 1, "empty file: expected HIERARCHY"),
    (" \n\n", 1, "empty file: expected HIERARCHY"),
    ("HIERARCHY\n", 1, "unexpected end of file: expected ROOT"),
    ("HIERARCHY\nROOT Hips\n", 2, "unexpected end of file: expected '{' to open joint 'Hips'"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n", 4, "unexpected end of file: expected '}' to close joint 'Hips'"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Zrotation\n}\n", 6,
     "unexpected end of file: expected MOTION"),
])
def test_bvh_end_of_file_says_what_was_expected(tmp_path: Path, text: str, line: int, expected: str) -> None:
    path = tmp_path / "cut.bvh"
    path.write_text(text)
    with pytest.raises(FileFormatError) as e:
        load_bvh(path)
    assert str(e.value) == f"{path}:{line}: {expected}"


def test_info_on_an_empty_bvh(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "empty.bvh"
    path.write_text("")
    code, _, err = run(capsys, "info", path)
    assert code == 1 and one_error_line(err) == f"kinema: error: {path}:1: empty file: expected HIERARCHY"


# ------------------------------------------------------------- 5. messages
@linux_only
def test_an_output_that_is_a_fifo_is_called_a_fifo(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   bvh_path: Path) -> None:
    out = tmp_path / "out.bvh"
    os.mkfifo(out)
    code, _, err = run(capsys, "convert", bvh_path, out)
    assert code == 1
    assert one_error_line(err) == f"kinema: error: {out}: already exists (a FIFO); pass --force to replace it"


def test_a_length_beyond_float32_without_scale_names_the_file_not_scale(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, bvh_path: Path) -> None:
    src = _with_first_value(bvh_path, tmp_path / "big.bvh", "1e39")
    code, _, err = run(capsys, "convert", src, tmp_path / "big.glb")
    line = one_error_line(err)
    assert code == 1 and "--scale" not in line
    assert line == (f"kinema: error: {src}: the largest length, 1e+39, is beyond glTF's float32 range (3.4e+38)")
    code, _, err = run(capsys, "convert", src, tmp_path / "big2.glb", "--scale", "2")  # with --scale: named
    assert code == 1 and one_error_line(err).startswith(f"kinema: error: {src}: --scale 2: the largest length")


def test_footlock_on_huge_values_is_one_line_naming_the_file_and_no_warnings(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "huge.bvh"
    save_bvh(src, kinema.samples.humanoid(), kinema.samples.clip("walk"))
    src = _with_first_value(src, src, "1e300")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        code, _, err = run(capsys, "footlock", src, "-o", tmp_path / "out.bvh")
    assert code == 1 and one_error_line(err).startswith(f"kinema: error: {src}: ")
    assert [str(w.message) for w in seen] == []


# ------------------------------------------------------------- 6. bench --quick
def test_bench_quick_claim_matches_what_was_measured(capsys: pytest.CaptureFixture[str]) -> None:
    """``bench --quick`` on a 2-core machine: 2.3 min wall (85 s of CPU) with numba's cache empty, most of it
    compiling; 7.7 s once compiled.  The help and docs/cli.md say both, not "well under a minute"."""
    code, out, _ = run(capsys, "bench", "--help")
    text = " ".join(out.split())
    assert code == 0 and "well under a minute" not in text and "about 2 minutes on 2 cores" in text
    cli_md = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert "about 2 minutes on 2 cores the first time" in cli_md
