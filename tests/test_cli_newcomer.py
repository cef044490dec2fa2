"""A newcomer's first hour with the command line (issue 16) and hostile names and shapes (issue 15.6, 15.7).

The README's main job runs twice into its git-ignored folder; the README's
reach example reaches; ``info --joints`` shows where joints are; an empty
clip, a terminal-clearing joint name and a 10,000-deep rig give clean
output; a dangling symlink is not written through; an unreachable Dask
scheduler fails fast and leaves no folder; the compile notice comes from
numba's own compile events; ``warmup`` compiles what the commands use; the
benchmarks collect; ``kinema.cli`` has no import cycle.
"""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kinema
from _cli import one_error_line, run
from kinema import mocap
from kinema.cli import main
from kinema.cli._parser import join_negative_values
from kinema.io import load_bvh

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"




def readme_command(start: str) -> list[str]:
    """The README's command line that starts with ``start`` (after ``&&``, before the comment), as argv."""
    for line in README.read_text().splitlines():
        for part in line.split("&&"):
            part = part.split("  #")[0].strip()
            if part.startswith(start):
                return shlex.split(part)
    raise AssertionError(f"no README line starts with {start!r}")


# ------------------------------------------------------------- main job
def test_the_readme_main_job_runs_twice_into_a_git_ignored_folder(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = README.read_text().split("```bash\n", 1)[1].splitlines()[0]
    assert first.startswith('pip install ".[cli]" && kinema footlock --sample walk')
    argv = readme_command("kinema footlock --sample walk")
    out_rel = argv[argv.index("-o") + 1]
    monkeypatch.chdir(tmp_path)  # a fresh clone: the output folder does not exist yet
    for attempt in range(2):
        code, out, err = run(capsys, *argv[1:])
        assert code == 0, (attempt, err)
        assert f"wrote         {out_rel}" in out
    sk, clip = load_bvh(tmp_path / out_rel)
    assert sk.n_joints == 15 and clip.n_frames == 39
    if shutil.which("git") and (REPO / ".git").exists():
        res = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", out_rel], capture_output=True)
        assert res.returncode == 0, f"{out_rel} is not git-ignored"


def test_a_missing_output_folder_is_made_and_not_left_on_failure(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    code, _, err = run(capsys, "sample", "walk", "-o", tmp_path / "a" / "b" / "walk.bvh")
    assert code == 0, err
    assert load_bvh(tmp_path / "a" / "b" / "walk.bvh")[1].n_frames == 39
    (tmp_path / "file").write_text("")
    code, _, err = run(capsys, "sample", "walk", "-o", tmp_path / "file" / "x.bvh")
    assert code == 1 and "is not a folder" in one_error_line(err)
    code, _, err = run(capsys, "footlock", tmp_path / "missing.bvh", "-o", tmp_path / "new" / "x.bvh")
    assert code == 1 and not (tmp_path / "new").exists()


# ---------------------------------------------------------------- reach
def test_the_readme_reach_example_reaches_and_info_shows_where_joints_are(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    info = readme_command("kinema info --sample walk --joints")
    code, out, _ = run(capsys, *info[1:], "--json")
    assert code == 0
    frame = int(info[info.index("--frame") + 1])
    data = json.loads(out)
    sk, clip = kinema.samples.humanoid(), kinema.samples.clip("walk")
    want = kinema.forward_kinematics(sk, clip.pose).positions[frame]
    assert data["frame"] == frame
    np.testing.assert_allclose([data["positions"][n] for n in sk.names], want, rtol=0, atol=1e-12)
    code, out, _ = run(capsys, *info[1:])
    row = next(ln for ln in out.splitlines() if ln.startswith("right_wrist "))
    np.testing.assert_allclose([float(x) for x in row.split()[1:]], want[sk.index("right_wrist")], rtol=1e-5)
    assert f"world positions at frame {frame} (m, Y up)" in out

    reach = readme_command("kinema reach --sample walk")
    code, out, err = run(capsys, *reach[1:], "--json")
    assert code == 0, err
    m = json.loads(out)
    assert m["status"] == "ok" and m["error_max_units"] < 1e-9
    target = np.array(m["target_units"])
    assert np.linalg.norm(target - want[sk.index("right_wrist")]) > 0.1  # a real move, not the animation
    code, _, err = run(capsys, "info", "--sample", "walk", "--joints", "--frame", "39")
    assert code == 1 and "has frames 0:38" in one_error_line(err)


def test_negative_values_need_no_equals_sign() -> None:
    assert join_negative_values(["reach", "--target", "-30,120,40", "--frames", "1:2"]) == \
        ["reach", "--target=-30,120,40", "--frames", "1:2"]
    assert join_negative_values(["--target", "-.5,1,2"]) == ["--target=-.5,1,2"]
    assert join_negative_values(["--target", "--frames"]) == ["--target", "--frames"]  # not a number: left alone


# ------------------------------------------------------ hostile inputs
def _bvh(names: list[str], depth_first_chain: bool = False, frames: int = 1) -> str:
    """A BVH of a chain of joints ``names`` (each the child of the one before), ``frames`` rest frames."""
    lines = ["HIERARCHY", f"ROOT {names[0]}", "{", "OFFSET 0 0 0",
             "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]
    for n in names[1:]:
        lines += [f"JOINT {n}", "{", "OFFSET 0 1 0", "CHANNELS 3 Zrotation Xrotation Yrotation"]
    lines += ["}"] * len(names)
    n_ch = 6 + 3 * (len(names) - 1)
    lines += ["MOTION", f"Frames: {frames}", "Frame Time: 0.033333"]
    lines += [" ".join(["0"] * n_ch)] * frames
    return "\n".join(lines) + "\n"


def test_footlock_on_an_empty_clip_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "empty.bvh"
    src.write_text(_bvh(["Hips", "LeftUpLeg", "LeftLeg", "LeftFoot"], frames=0))
    for argv in (["footlock", src, "-o", tmp_path / "x.bvh"],
                 ["reach", src, "-o", tmp_path / "x.bvh", "--effector", "LeftFoot", "--target", "0,0,0",
                  "--frames", "0:0"]):
        code, _, err = run(capsys, *argv)
        assert code == 1
        assert one_error_line(err) == f"kinema: error: {src}: the clip has no frames; there is nothing to " + (
            "foot-lock" if argv[0] == "footlock" else "re-aim")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.bvh"]


def test_info_escapes_control_characters_in_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "evil.bvh"
    src.write_text(_bvh(["Hips", "Clear\x1b[2J", "Bell\x07"]))
    code, out, _ = run(capsys, "info", src)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert "Clear\\x1b[2J" in out and "Bell\\x07" in out
    code, out, _ = run(capsys, "info", src, "--joints")
    assert code == 0 and "\x1b" not in out and "Clear\\x1b[2J" in out
    code, out, _ = run(capsys, "info", src, "--json")
    assert json.loads(out)["names"][1] == "Clear\x1b[2J" and "\x1b" not in out  # JSON escapes it as \u001b


def test_info_walks_a_10000_deep_rig(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kinema.cli._commands import TREE_MAX_INDENT

    depth = 10_000
    src = tmp_path / "deep.bvh"
    src.write_text(_bvh([f"J{i}" for i in range(depth)]))
    code, out, err = run(capsys, "info", src)
    assert code == 0, err
    tree = out.split("skeleton:\n", 1)[1].splitlines()
    assert len(tree) == depth
    assert tree[0] == "J0" and tree[1] == "`-- J1"
    assert tree[-1].endswith(f"... [depth {depth - 1}] J{depth - 1}")
    assert max(len(ln) for ln in tree) < 4 * TREE_MAX_INDENT + 40  # indentation stops growing


def test_tree_lines_branches_in_file_order() -> None:
    from kinema.cli._commands import tree_lines

    sk = kinema.Skeleton(["root", "a", "a1", "b", "other_root"], [-1, 0, 1, 0, -1], np.zeros((5, 3)))
    assert tree_lines(sk) == ["root", "|-- a", "|   `-- a1", "`-- b", "other_root"]


def test_a_dangling_symlink_is_not_written_through_without_force(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    link = tmp_path / "out.bvh"
    target = tmp_path / "elsewhere.bvh"
    link.symlink_to(target)
    code, _, err = run(capsys, "sample", "walk", "-o", link)
    assert code == 1 and "already exists (a symlink to " in one_error_line(err)
    assert not target.exists()
    code, _, err = run(capsys, "sample", "walk", "-o", link, "--force")
    assert code == 0 and load_bvh(target)[1].n_frames == 39  # --force: the link's target is written


# ------------------------------------------------------------------ dask
def test_an_unreachable_dask_scheduler_fails_fast_and_leaves_no_folder(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    import distributed  # noqa: F401  (imported before timing: its import is not the connection's time)

    src = tmp_path / "in"
    src.mkdir()
    code = main(["sample", "walk", "-o", str(src / "walk.bvh")])
    assert code == 0
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    capsys.readouterr()
    out_dir = tmp_path / "out"
    t0 = time.perf_counter()
    code, _, err = run(capsys, "batch", "footlock", src, "-o", out_dir, "--dask", f"tcp://127.0.0.1:{port}",
                       "--dask-timeout", "1")
    elapsed = time.perf_counter() - t0
    assert code == 1
    assert f"cannot connect to the Dask scheduler at tcp://127.0.0.1:{port} within 1 s" in one_error_line(err)
    assert elapsed < 5.0
    assert not out_dir.exists()


def test_batch_help_explains_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "batch", "--help")
    assert code == 0
    assert "INPUT_DIR" in out and "folder of input files" in out
    assert "arguments passed on:" in out and "reach:    --effector --target --frames" in out
    assert "--dask-timeout" in out
    passed_on = out.split("arguments passed on:\n", 1)[1].split("\n  (see", 1)[0]
    for line in passed_on.splitlines()[1:]:
        command, options = line.split(":", 1)
        code, own, _ = run(capsys, command.strip(), "--help")
        for option in options.split():
            assert f" {option}" in own, (command, option)  # every option listed is the command's


# ------------------------------------------------------------- figures
def test_json_seconds_is_the_commands_wall_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    t0 = time.perf_counter()
    code, out, _ = run(capsys, "convert", "--sample", "walk", tmp_path / "w.glb", "--json")
    wall = time.perf_counter() - t0
    assert code == 0
    m = json.loads(out)
    assert 0.5 * wall <= m["seconds"] <= wall


# ----------------------------------------------------- compile notice
def test_the_spinner_says_compiling_only_while_numba_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich")
    import numba

    from kinema.cli import _ui

    shown: list[str] = []
    monkeypatch.setattr(_ui._RichProgress, "_show", lambda self: shown.append(self.shown))

    @numba.njit(cache=False)
    def fresh(x: float) -> float:  # never compiled before: a real compile
        return x * 2.0 + 1.0

    ui = _ui.UI(progress=True)
    with ui.status("footlock: walk") as st:
        st.describe("footlock: walk")
        fresh(1.0)
        assert shown[-1] == "footlock: walk"
        compiled = list(shown)
        fresh(2.0)  # compiled already: nothing to say
        assert shown == compiled
    assert f"footlock: walk: {_ui.COMPILING}" in compiled
    assert compiled.index(f"footlock: walk: {_ui.COMPILING}") < len(compiled) - 1  # and it went away again
    shown.clear()
    fresh_after = numba.njit(cache=False)(lambda x: x - 1.0)
    fresh_after(1.0)  # outside the spinner: no listener is left behind
    assert shown == []


def test_warmup_compiles_what_the_commands_use(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import pkgutil

    from kinema import _kernels
    from kinema.cli import _ui

    code, out, _ = run(capsys, "warmup")
    assert code == 0
    for what in ("solve_two_bone", "solve_ccd", "solve_fabrik", "solve_fabrik_tree", "solve_chains",
                 "forward_kinematics", "BVH reader and writer", "footlock", "reach"):
        assert f"\n{what} " in out, what
    assert "kernels ready in" in out
    for info in pkgutil.iter_modules(_kernels.__path__):
        assert f"kinema._kernels.{info.name}" in sys.modules
    events: list[bool] = []
    with _ui.compile_notice(events.append):
        for argv in (["footlock", "--sample", "walk", "-o", tmp_path / "f.bvh"],
                     ["reach", "--sample", "walk", "-o", tmp_path / "r.bvh", "--effector", "right_wrist",
                      "--target", "0.85,1.1,0.35", "--frames", "16:24", "--chain", "chest"]):
            assert run(capsys, *argv)[0] == 0
    assert events == []  # nothing left to compile after warmup


# ---------------------------------------------------------- benchmarks
def test_the_benchmarks_are_collected() -> None:
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
                          str(REPO / "benchmarks")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    n = int(res.stdout.strip().splitlines()[-1].split()[0])
    assert n > 0
    assert "benchmarks/bench_fk.py::" in res.stdout


# ------------------------------------------------------------- imports
def test_kinema_cli_has_no_import_cycle() -> None:
    """Every ``from .x import`` in kinema/cli (function-level ones too) forms an acyclic graph."""
    folder = REPO / "src" / "kinema" / "cli"
    graph: dict[str, set[str]] = {}
    for f in folder.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module)
                else:
                    deps |= {a.name for a in node.names}
        graph[f.stem] = deps & {p.stem for p in folder.glob("*.py")}
    graph["__init__"] = set()  # the package imports _app and nothing imports the package back (checked below)
    assert not any("__init__" in d for m, d in graph.items() if m != "__main__")
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, " -> ".join((*path, m))
        if m in done:
            return
        for d in graph.get(m, ()):
            visit(d, (*path, m))
        done.add(m)

    for m in graph:
        visit(m, ())


def test_clip_names_a_bvh_files_one_motion(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A BVH file holds one motion, named after the file: ``--clip`` with that name reads it, another name is
    refused as a glTF file's missing animation is (it was ignored: the one motion was used whatever was asked)."""
    src = tmp_path / "walk.bvh"
    kinema.io.save_bvh(src, kinema.samples.humanoid(), kinema.samples.clip("walk"))
    code, out, err = run(capsys, "info", src, "--clip", "walk", "--json")
    assert code == 0, err
    assert json.loads(out)["clip"] == "walk"
    code, _, err = run(capsys, "convert", src, tmp_path / "run.glb", "--clip", "run")
    assert code == 1
    assert one_error_line(err) == (f"kinema: error: {src}: no animation named 'run'; a BVH file holds one, "
                                   "'walk' (named after the file)")
    assert not (tmp_path / "run.glb").exists()


def test_fps_resamples_a_bvh_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``convert --fps`` resamples BVH input as it does glTF (it was silently ignored for BVH); a rate whose
    frames would not fit the file's decode budget is refused before anything is allocated."""
    src = tmp_path / "walk.bvh"
    walk = kinema.samples.clip("walk")
    kinema.io.save_bvh(src, kinema.samples.humanoid(), walk)
    code, _, err = run(capsys, "convert", src, tmp_path / "walk60.bvh", "--fps", "60")
    assert code == 0, err
    _, clip = load_bvh(tmp_path / "walk60.bvh")
    source = load_bvh(src)[1]
    assert clip.n_frames == int(np.ceil(source.duration * 60.0)) + 1 == 77 and abs(clip.fps - 60.0) <= 1e-6
    want = mocap.resample(source, 60.0)
    assert np.max(np.abs(clip.pose.translations - want.pose.translations)) <= 1e-6  # BVH's printed digits
    assert np.all(kinema.rotation.equal(clip.pose.rotations, want.pose.rotations, atol=1e-6))
    code, _, err = run(capsys, "convert", src, tmp_path / "huge.bvh", "--fps", "1e12")
    assert code == 1
    assert "more than this file may decode" in one_error_line(err)
    assert not (tmp_path / "huge.bvh").exists()
