"""The ``kinema`` command line: commands, outputs that load back, safety, batch engines, Ctrl-C.

Most tests call :func:`kinema.cli.main` in this process (kernels stay
compiled); the exit-status, traceback and Ctrl-C tests run the real command
in a subprocess.  The capture tests/data/bvh/test_mocapbank.bvh is read in
place (a test fixture, never copied into the package).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kinema
from _cli import default_sigint, one_error_line, run
from kinema import Clip, Pose, mocap
from kinema.io import load_bvh, load_gltf, save_bvh

CLI = [sys.executable, "-m", "kinema.cli"]


@pytest.fixture(scope="module")
def capture_path(shared_data: Path) -> Path:
    return shared_data / "bvh" / "test_mocapbank.bvh"




def world(sk: kinema.Skeleton, clip: Clip) -> np.ndarray:
    return kinema.forward_kinematics(sk, clip.pose).positions


# ------------------------------------------------------------------- basics
def test_help_lists_every_command_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("info", "convert", "footlock", "reach", "batch", "bench", "sample"):
        assert f"\n    {name} " in out
    assert "examples:" in out and "kinema footlock --sample walk -o out/walk_locked.bvh --force" in out
    assert "exit status:" in out and "3  missed" in out
    for name in ("footlock", "reach", "batch", "convert"):
        code, out, _ = run(capsys, name, "--help")
        assert code == 0 and "examples:" in out, name
        if name != "convert":
            assert "3  missed" in out, name


def test_console_script_is_declared_and_runs() -> None:
    from importlib.metadata import entry_points

    eps = [e for e in entry_points(group="console_scripts") if e.name == "kinema"]
    assert eps and eps[0].value == "kinema.cli:main"
    out = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"kinema {kinema.__version__}"


def test_info(capsys: pytest.CaptureFixture[str], capture_path: Path) -> None:
    code, out, _ = run(capsys, "info", capture_path)
    assert code == 0
    assert "24 (19 + 5 end sites)" in out
    assert "455 at 30.0003 fps" in out
    assert "centimetres" in out and "Y up" in out
    assert "LeftAnkle, RightAnkle" in out
    assert "\nHips\n|-- Chest\n" in out and "`-- RightAnkle_End" in out
    code, out, _ = run(capsys, "info", capture_path, "--json")
    info = json.loads(out)
    assert info["frames"] == 455 and info["joints"] == 24 and info["end_sites"] == 5
    assert info["units"] == "centimetres" and info["up_axis"] == "Y"
    code, out, _ = run(capsys, "info", "--sample", "walk", "--json")
    info = json.loads(out)
    assert info["units"] == "metres" and info["frames"] == 39 and info["feet"] == ["left_ankle", "right_ankle"]


# ----------------------------------------------------------------- footlock
def test_footlock_keep_length_flag_reaches_the_library(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--keep-length`` (the default) is ``keep_length=True``, ``--no-keep-length`` is False: the written walk is
    the library's result (to the file's 6 decimals); with it the near-straight legs keep their length instead
    of the hips sinking (3.5 cm without it)."""
    sk = kinema.samples.humanoid()
    walk = kinema.samples.clip("walk")
    figures = {}
    names = {(): "default", ("--keep-length",): "kept", ("--no-keep-length",): "fixed"}
    for flag, name in names.items():
        out_path = tmp_path / f"walk_{name}.bvh"
        code, out, _ = run(capsys, "footlock", "--sample", "walk", "-o", out_path, "--json", *flag)
        assert code == 0
        figures[flag] = json.loads(out)["hips_drop_max_units"]
    kept = mocap.footlock(sk, walk, keep_length=True)
    fixed = mocap.footlock(sk, walk, keep_length=False)
    assert figures[("--no-keep-length",)] == pytest.approx(fixed.metrics["hips_drop_max"], rel=1e-12)
    assert figures[()] == figures[("--keep-length",)] == pytest.approx(kept.metrics["hips_drop_max"], abs=1e-12)
    assert figures[()] < 1e-3 * figures[("--no-keep-length",)]
    assert kept.metrics["hips_drop_max"] == 0.0  # not ~1e-16: a need below DROP_RTOL of the leg is rounding
    for flag, line in (((), "hips lowered  no"), (("--no-keep-length",), "hips lowered  up to 0.03503 m")):
        code, out, _ = run(capsys, "footlock", "--sample", "walk", "-o", tmp_path / "text.bvh", "--force", *flag)
        assert code == 0 and line in out and ("(and the hips' height)" in out) == bool(flag)
    for flag, want in (((), kept), (("--no-keep-length",), fixed)):
        _, written = load_bvh(tmp_path / f"walk_{names[flag]}.bvh")
        np.testing.assert_allclose(world(sk, written), world(sk, want.clip), atol=2e-5)


def test_footlock_output_loads_back_and_skates_less(capsys: pytest.CaptureFixture[str], capture_path: Path,
                                                    tmp_path: Path) -> None:
    out_path = tmp_path / "locked.bvh"
    code, out, _ = run(capsys, "footlock", capture_path, "-o", out_path, "--json")
    assert code == 0
    metrics = json.loads(out)
    assert metrics["skate_after_units_per_s"] <= 0.2 * metrics["skate_before_units_per_s"]
    assert metrics["status"] == "ok" and metrics["units"] == "cm"
    sk0, clip0 = load_bvh(capture_path)
    sk1, clip1 = load_bvh(out_path)
    assert sk1.names == sk0.names and clip1.n_frames == clip0.n_frames
    # Recompute from the files: contacts of the input, feet of the output as written (6 decimals).
    c = mocap.detect_contacts(sk0, clip0)
    feet = list(c.feet)
    times = mocap.frame_times(clip0)
    before = mocap.foot_skate(world(sk0, clip0)[:, feet], c.mask, times)
    after = mocap.foot_skate(world(sk1, clip1)[:, feet], c.mask, times)
    assert after <= 0.2 * before
    np.testing.assert_allclose(sk1.bone_lengths(clip1.pose), sk0.bone_lengths(clip0.pose), rtol=1e-6, atol=1e-6)


def test_footlock_on_the_bundled_sample_prints_before_and_after(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "footlock", "--sample", "walk", "-o", "walk_locked.bvh")
    assert code == 0, err
    lines = dict((line[:12].strip(), line[12:].strip()) for line in out.splitlines())
    assert lines["input"].startswith("sample:walk (39 frames)")
    assert lines["contacts"] == ("left_ankle 1 contact over 19 frames, right_ankle 1 contact over 19 frames "
                                 "(of 39 frames)")
    assert "->" in lines["foot skate"] and "m/s" in lines["foot skate"] and "(-100.0%)" in lines["foot skate"]
    assert "deg/s" in lines["joint speed"] and "largest of the changed joints" in lines["joint speed"]
    assert lines["changed"].startswith("right_hip, right_knee, right_ankle, left_hip, left_knee, left_ankle")
    assert lines["result"].startswith("ok: within")
    assert lines["wrote"] == "walk_locked.bvh"
    sk, clip = load_bvh(tmp_path / "walk_locked.bvh")
    assert sk.n_joints == 15 and clip.n_frames == 39


def test_existing_output_needs_force_and_inputs_are_never_replaced(capsys: pytest.CaptureFixture[str],
                                                                   capture_path: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "locked.bvh"
    out_path.write_text("precious")
    code, _, err = run(capsys, "footlock", capture_path, "-o", out_path)
    assert code == 1 and "--force" in one_error_line(err)
    assert out_path.read_text() == "precious"
    code, _, err = run(capsys, "footlock", capture_path, "-o", out_path, "--force", "-q")
    assert code == 0 and load_bvh(out_path)[1].n_frames == 455
    # an input is never overwritten, --force or not, however it is spelt
    src = tmp_path / "in.bvh"
    src.write_bytes(capture_path.read_bytes())
    before = src.read_bytes()
    for spelling in (src, tmp_path / "." / "in.bvh"):
        code, _, err = run(capsys, "footlock", src, "-o", spelling, "--force")
        assert code == 1 and "refusing to overwrite the input" in one_error_line(err)
    link = tmp_path / "link.bvh"
    link.symlink_to(src)
    code, _, err = run(capsys, "convert", src, link, "--force")
    assert code == 1 and "input" in one_error_line(err)
    assert src.read_bytes() == before


# -------------------------------------------------------------------- reach
def test_reach_cli_lands_within_1e4(capsys: pytest.CaptureFixture[str], capture_path: Path,
                                    tmp_path: Path) -> None:
    sk, clip = load_bvh(capture_path)
    j = sk.index("RightWrist")
    target = world(sk, clip)[230, j] + [8.0, 5.0, 5.0]
    out_path = tmp_path / "reach.bvh"
    code, out, err = run(capsys, "reach", capture_path, "-o", out_path, "--effector", "RightWrist",
                         "--target=" + ",".join(repr(float(x)) for x in target), "--frames", "200:260",
                         "--blend", "15", "--json")
    assert code == 0, err
    m = json.loads(out)
    assert m["range"] == [200, 260] and m["blend_frames"] == 15 and m["status"] == "ok"
    sk1, clip1 = load_bvh(out_path)
    p = world(sk1, clip1)[:, j]
    assert np.linalg.norm(p[200:261] - target, axis=-1).max() < 1e-4
    # outside the blend window the written motion is the input's (to the file's 6 decimals)
    p0 = world(sk, clip)
    p1 = world(sk1, clip1)
    outside = np.r_[0:185, 276:455]
    assert np.abs(p1[outside] - p0[outside]).max() < 1e-3


def test_reach_out_of_reach_is_missed_with_exit_status_3(capsys: pytest.CaptureFixture[str], capture_path: Path,
                                                          tmp_path: Path) -> None:
    # also: a negative first value works without the --target= form
    code, out, err = run(capsys, "reach", capture_path, "-o", tmp_path / "r.bvh", "--effector", "RightWrist",
                         "--target", "-1000,1000,1000", "--frames", "10:20", "--json")
    assert code == 3
    m = json.loads(out)
    assert m["status"] == "missed" and m["target_units"] == [-1000.0, 1000.0, 1000.0]
    assert m["error_max_units"] > 1000.0 and m["tolerance_units"] == pytest.approx(1e-6 * 166.7, rel=0.05)
    assert one_error_line(err).startswith("kinema reach: missed: the effector ends ")
    assert load_bvh(tmp_path / "r.bvh")[1].n_frames == 455  # written anyway


# ------------------------------------------------------------------ convert
def test_convert_bvh_glb_bvh_round_trip(capsys: pytest.CaptureFixture[str], capture_path: Path,
                                        tmp_path: Path) -> None:
    glb = tmp_path / "capture.glb"
    back = tmp_path / "back.bvh"
    code, out, err = run(capsys, "convert", capture_path, glb)
    assert code == 0, err
    assert out.startswith(f"wrote {glb} (24 joints, 455 frames")
    asset = load_gltf(glb)
    assert asset.mesh is not None  # capsules on the bones so viewers show something
    code, _, err = run(capsys, "convert", glb, back)
    assert code == 0, err
    sk0, clip0 = load_bvh(capture_path)
    sk1, clip1 = load_bvh(back)
    assert sk1.names == sk0.names
    # float32 inside the GLB: ~1e-7 relative of ~250 cm
    np.testing.assert_allclose(world(sk1, clip1), world(sk0, clip0), rtol=0, atol=2e-4)


def test_convert_gltf_fixture_to_bvh_and_scale(capsys: pytest.CaptureFixture[str], shared_data: Path,
                                               tmp_path: Path) -> None:
    src = shared_data / "gltf" / "RiggedFigure.gltf"
    out_path = tmp_path / "figure.bvh"
    code, _, err = run(capsys, "convert", src, out_path, "--fps", "24")
    assert code == 0, err
    asset = load_gltf(src, fps=24)
    sk, clip = load_bvh(out_path)
    assert clip.n_frames == next(iter(asset.clips.values())).n_frames and clip.fps == pytest.approx(24.0, rel=1e-5)
    np.testing.assert_allclose(world(sk, clip), world(asset.skeleton, next(iter(asset.clips.values()))),
                               atol=1e-5)
    half = tmp_path / "half.bvh"
    code, _, _ = run(capsys, "convert", out_path, half, "--scale", "0.5")
    assert code == 0
    sk2, clip2 = load_bvh(half)
    np.testing.assert_allclose(world(sk2, clip2), 0.5 * world(sk, clip), atol=1e-6)


def test_sample_command_writes_the_bundled_walk(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "sample", "walk", "-o", tmp_path / "walk.bvh")
    assert code == 0 and "39 frames" in out
    sk, clip = load_bvh(tmp_path / "walk.bvh")
    ref = kinema.samples.clip("walk")
    np.testing.assert_allclose(world(sk, clip), world(kinema.samples.humanoid(), ref), atol=1e-6)


# ------------------------------------------------------------------- warmup
def test_after_warmup_the_public_api_compiles_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """``kinema warmup`` covers every kernel a user reaches: solvers (single, small and parallel batch),
    FK and its inverse, rotations, limits, the 2D arm; afterwards other inputs compile nothing."""
    from kinema import rotation
    from kinema.cli import _ui
    from kinema.fk import FK_PARALLEL_MIN_JOINTS

    code, out, _ = run(capsys, "warmup")
    assert code == 0 and "kernels ready in" in out
    for what in ("solve_dls", "solve_two_bone_2d", "world_to_local", "rotation", "joint limits"):
        assert f"\n{what} " in out, what
    sk = kinema.samples.humanoid()
    walk = kinema.samples.clip("walk")
    rng = np.random.default_rng(7)
    targets = kinema.forward_kinematics(sk, walk.pose[:3]).positions[:, sk.index("right_wrist")]
    many = targets[0] + rng.normal(0.0, 0.1, size=(300, 3))  # a parallel batch of another size
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    q = walk.pose.rotations[5:9, 3]
    def loaded() -> dict[str, int]:  # compiled or loaded from numba's cache, per kernel
        import importlib
        import pkgutil

        from kinema import _kernels

        out = {}
        for info in pkgutil.iter_modules(_kernels.__path__):
            mod = importlib.import_module(f"kinema._kernels.{info.name}")
            for name, obj in vars(mod).items():
                if hasattr(obj, "overloads") and hasattr(obj, "py_func"):
                    out[f"{info.name}.{name}"] = len(obj.overloads)
        return out

    before = loaded()
    events: list[bool] = []
    with _ui.compile_notice(events.append):
        for t in (targets[1], targets, many):
            kinema.solve_two_bone(sk, walk.pose[4], arm, t, pole=t + [0.0, 0.0, -1.0])
            kinema.solve_two_bone(sk, walk.pose[4], arm, t, bend_hint=[0.0, 0.0, -1.0])  # the full drivers
            kinema.solve_ccd(sk, walk.pose[4], ("root", "right_wrist"), t, iterations=5)
            kinema.solve_fabrik(sk, walk.pose[4], ("root", "right_wrist"), t)
            kinema.solve_dls(sk, walk.pose[4], [kinema.PositionGoal("right_wrist", t)], iterations=5)
        kinema.solve_two_bone_2d([0.0, 0.0], [[0.5, 0.1], [0.1, 0.2]], 0.3, 0.4, -1)
        big = walk.pose[0].broadcast((FK_PARALLEL_MIN_JOINTS // sk.n_joints + 5,))
        world = kinema.forward_kinematics(sk, big, matrices=True)
        kinema.world_to_local(sk, world.rotations[:3], world.positions[:3])
        kinema.world_to_local(sk, world.rotations, world.positions)  # the parallel driver
        rotation.as_euler(rotation.slerp(q, q[::-1], 0.5), "yxz")
        rotation.swing_twist(rotation.from_rotvec(rotation.as_rotvec(q)), [0.0, 1.0, 0.0])
        kinema.limits.Hinge((0.0, 0.0, 1.0), 0.0, 2.0).clamp(q)
    assert events == []  # nothing compiled
    after = loaded()
    assert {k: v for k, v in after.items() if v != before.get(k)} == {}  # nor loaded from the cache: warmup had it


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("argv, status, needle", [
    (["footlock", "CAPTURE"], 2, "-o/--output"),
    (["footlock", "CAPTURE", "-o", "OUT.txt"], 2, "unknown file type"),
    (["footlock", "missing.bvh", "-o", "OUT.bvh"], 1, "no such file"),
    (["footlock", "BAD", "-o", "OUT.bvh"], 1, "bad.bvh:4: OFFSET needs 3 numbers"),
    (["footlock", "BADGLTF", "-o", "OUT.bvh"], 1, "bad.gltf"),
    (["footlock", "CAPTURE", "-o", "OUT.bvh", "--feet", "LeftFoot,RightAnkle"], 1, "no joint named 'LeftFoot'"),
    (["footlock", "CAPTURE", "-o", "OUT.bvh", "--height", "-3"], 2, "positive"),
    (["footlock", "--sample", "jog", "-o", "OUT.bvh"], 2, "unknown sample 'jog'"),  # a bad command line
    (["footlock", "CAPTURE", "--sample", "walk", "-o", "OUT.bvh"], 2, "not both"),
    (["footlock", "CAPTURE", "-o", "OUT.bvh", "--hysteresis", "0.5"], 2, "--hysteresis must be >= 1"),
    (["reach", "CAPTURE", "-o", "OUT.bvh", "--effector", "RightWrist", "--target", "1,2,3", "--frames", "1:5",
      "--blend", "-1"], 2, "--blend must be >= 0"),
    (["batch", "footlock", "TMP", "-o", "OUT", "--workers", "0"], 2, "--workers must be >= 1"),
    (["batch", "convert", "TMP", "-o", "OUT", "--to", "txt"], 2, "--to must be"),
    (["reach", "CAPTURE", "-o", "OUT.bvh", "--effector", "RightWrist", "--target", "1,2", "--frames", "1:5"],
     2, "3 comma-separated"),
    (["reach", "CAPTURE", "-o", "OUT.bvh", "--effector", "RightWrist", "--target", "1,2,3", "--frames", "9:5"],
     2, "A <= B"),
    (["reach", "CAPTURE", "-o", "OUT.bvh", "--effector", "RightWrist", "--target", "1,2,3", "--frames", "0:999"],
     1, "0:454"),
    (["reach", "CAPTURE", "-o", "OUT.bvh", "--effector", "Hand", "--target", "1,2,3", "--frames", "1:5"],
     1, "no joint named 'Hand'"),
    (["batch", "footlock", "nowhere", "-o", "OUT"], 1, "no such folder"),
    (["batch", "footlock", "TMP", "-o", "TMP"], 1, "output folder is the input folder"),
    (["batch", "jump", "TMP", "-o", "OUT"], 2, "invalid choice"),
    (["batch", "footlock", "TMP", "-o", "OUT", "--heigth", "3"], 2, "unrecognized arguments"),
    (["info", "CAPTURE", "--frobnicate"], 2, "unrecognized arguments"),  # a bad command line, as for batch
    (["convert", "CAPTURE"], 2, "convert needs IN and OUT"),
])
def test_bad_arguments_and_files_give_one_line(capsys: pytest.CaptureFixture[str], capture_path: Path,
                                               tmp_path: Path, argv: list[str], status: int, needle: str) -> None:
    (tmp_path / "bad.bvh").write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n")
    (tmp_path / "bad.gltf").write_text('{"asset": {"version": "2.0"}, "nodes": [{"children": [7]}]}')
    (tmp_path / "x.bvh").write_bytes(b"")
    subs = {"CAPTURE": str(capture_path), "BAD": str(tmp_path / "bad.bvh"), "BADGLTF": str(tmp_path / "bad.gltf"),
            "TMP": str(tmp_path), "OUT.bvh": str(tmp_path / "out.bvh"), "OUT.txt": str(tmp_path / "out.txt"),
            "OUT": str(tmp_path / "outdir")}
    code, out, err = run(capsys, *[subs.get(a, a) for a in argv])
    assert code == status
    line = one_error_line(err)
    assert line.startswith("kinema"), line
    assert needle in line, line
    assert not (tmp_path / "out.bvh").exists()


def test_real_process_exit_status_and_debug_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.bvh"
    bad.write_text("MOTION\n")
    res = subprocess.run([*CLI, "info", str(bad)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert one_error_line(res.stderr).startswith(f"kinema: error: {bad}")
    res = subprocess.run([*CLI, "info", str(bad), "--debug"], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "Traceback" in res.stderr and "FileFormatError" in res.stderr


# -------------------------------------------------------------------- batch
@pytest.fixture(scope="module")
def batch_inputs(tmp_path_factory: pytest.TempPathFactory, capture_path: Path) -> Path:
    folder = tmp_path_factory.mktemp("batch_in")
    (folder / "capture.bvh").write_bytes(capture_path.read_bytes())
    sk = kinema.samples.humanoid()
    save_bvh(folder / "walk.bvh", sk, kinema.samples.clip("walk"))
    from kinema.io import save_gltf

    save_gltf(folder / "run.glb", sk, {"run": kinema.samples.clip("run")}, mesh=False)
    (folder / "notes.txt").write_text("not a motion file")
    return folder


def test_batch_reports_a_failed_file_continues_and_resumes(capsys: pytest.CaptureFixture[str],
                                                           batch_inputs: Path, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for f in batch_inputs.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    (src / "broken.bvh").write_text("HIERARCHY\nROOT\n")
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, "batch", "footlock", src, "-o", out_dir, "--workers", "1")
    assert code == 1
    assert "broken.bvh" in err and "FAILED" in out
    assert "3 ok, 0 missed, 1 failed, 0 skipped" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["capture.bvh", "run.glb", "walk.bvh"]
    for name in ("capture.bvh", "walk.bvh"):
        assert load_bvh(out_dir / name)[1].n_frames in (455, 39)
    assert next(iter(load_gltf(out_dir / "run.glb").clips.values())).n_frames == 25
    stamp = (out_dir / "walk.bvh").stat().st_mtime_ns
    code, out, _ = run(capsys, "batch", "footlock", src, "-o", out_dir, "--workers", "1")
    assert "0 ok, 0 missed, 1 failed, 3 skipped" in out  # resumed: finished outputs are not redone
    assert (out_dir / "walk.bvh").stat().st_mtime_ns == stamp
    code, out, _ = run(capsys, "batch", "footlock", src, "-o", out_dir, "--workers", "1", "--force",
                       "--pattern", "*.bvh")
    assert code == 1 and "2 ok, 0 missed, 1 failed, 0 skipped" in out


def test_batch_output_equals_the_single_command(capsys: pytest.CaptureFixture[str], batch_inputs: Path,
                                                tmp_path: Path) -> None:
    code, _, _ = run(capsys, "batch", "footlock", batch_inputs, "-o", tmp_path / "b", "--workers", "1",
                     "--height", "3")
    assert code == 0
    code, _, _ = run(capsys, "footlock", batch_inputs / "capture.bvh", "-o", tmp_path / "single.bvh", "--height", "3")
    assert code == 0
    assert (tmp_path / "b" / "capture.bvh").read_bytes() == (tmp_path / "single.bvh").read_bytes()


def _batch_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_batch_dask_local_is_byte_identical_to_the_local_pool(batch_inputs: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    pool = subprocess.run([*CLI, "batch", "footlock", str(batch_inputs), "-o", str(tmp_path / "pool"),
                           "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert pool.returncode == 0, pool.stderr
    assert "local pool, 2 workers" in pool.stdout
    dask = subprocess.run([*CLI, "batch", "footlock", str(batch_inputs), "-o", str(tmp_path / "dask"),
                           "--dask", "local"], capture_output=True, text=True, timeout=600)
    assert dask.returncode == 0, dask.stderr
    assert "dask LocalCluster, 2 workers" in dask.stdout
    a, b = _batch_bytes(tmp_path / "pool"), _batch_bytes(tmp_path / "dask")
    assert sorted(a) == ["capture.bvh", "run.glb", "walk.bvh"]
    assert a == b


# ------------------------------------------------------------------- Ctrl-C
@pytest.fixture(scope="module")
def long_capture(tmp_path_factory: pytest.TempPathFactory, capture_path: Path) -> Path:
    """The capture repeated 60 times (27,300 frames, ~10 MB): long enough to interrupt mid-write."""
    sk, clip = load_bvh(capture_path)
    reps = 60
    long = Clip(Pose(np.tile(clip.pose.translations, (reps, 1, 1)), np.tile(clip.pose.rotations, (reps, 1, 1))),
                clip.fps)
    path = tmp_path_factory.mktemp("long") / "long.bvh"
    save_bvh(path, sk, long)
    return path


def _temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]


def _interrupt_when(proc: subprocess.Popen[str], ready: object, timeout: float = 600.0) -> None:
    t0 = time.monotonic()
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, "the command ended before it could be interrupted"
        assert time.monotonic() - t0 < timeout, "timed out waiting for the command to start writing"
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state ``T`` in Linux's ``/proc/PID/stat``; a zombie is ``Z``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


def _interrupt_mid_write(cmd: list[str], folder: Path, attempts: int = 5) -> subprocess.Popen[str]:
    """Run ``cmd`` and send it SIGINT while its temporary output file is in ``folder`` (mid-write).

    Seeing the file and sending the signal are two steps, and on a loaded machine the write (10 to 50 ms for
    the long capture) can end between them: the command then ends normally (status 0) or after the rename.
    So the command is stopped (SIGSTOP) once the file is seen and the file is looked for again while the
    command cannot move; only if it is still there is SIGINT sent before the command is let go
    (SIGCONT), so the signal is pending before the rename.  A command that got past the rename first is
    run again, up to ``attempts`` times.
    """
    for _ in range(attempts):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_sigint)
        t0 = time.monotonic()
        while proc.poll() is None:
            assert time.monotonic() - t0 < 600.0, "timed out waiting for the command to start writing"
            if _temp_files(folder):
                proc.send_signal(signal.SIGSTOP)
                while proc.poll() is None and not _stopped(proc.pid):
                    time.sleep(0.0005)
                if proc.poll() is None and _temp_files(folder):
                    proc.send_signal(signal.SIGINT)
                    proc.send_signal(signal.SIGCONT)
                    return proc
                proc.send_signal(signal.SIGCONT)  # (a no-op for a command that has ended)
            time.sleep(0.002)
        proc.communicate(timeout=120)
        for p in folder.iterdir():  # the finished output: the next attempt starts from an empty folder
            p.unlink()
    pytest.fail(f"the command finished writing before it could be interrupted, {attempts} times")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's state in Linux's /proc")
def test_ctrl_c_while_writing_leaves_no_partial_file(long_capture: Path, tmp_path: Path) -> None:
    out_path = tmp_path / "locked.bvh"
    proc = _interrupt_mid_write([*CLI, "footlock", str(long_capture), "-o", str(out_path)], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert one_error_line(err) == "kinema: interrupted (no partial output was left)"
    assert not out_path.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a subprocess is POSIX")
def test_ctrl_c_stops_a_batch_cleanly_and_it_resumes(long_capture: Path, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        os.link(long_capture, src / f"take{i}.bvh")
    out_dir = tmp_path / "out"
    work = tmp_path / "work"  # the workers' temporary folders go here (TMPDIR): none may be left behind
    work.mkdir()
    env = dict(os.environ, TMPDIR=str(work))
    cmd = [*CLI, "batch", "footlock", str(src), "-o", str(out_dir), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint)

    def first_done() -> bool:
        return out_dir.is_dir() and any(not p.name.startswith(".") for p in out_dir.iterdir())

    _interrupt_when(proc, first_done)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert _temp_files(out_dir) == []
    assert list(work.iterdir()) == []
    finished = sorted(p.name for p in out_dir.iterdir())
    assert 1 <= len(finished) < 4
    for name in finished:  # whatever is there is complete
        assert load_bvh(out_dir / name)[1].n_frames == 455 * 60
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    assert list(work.iterdir()) == []
    assert f"{4 - len(finished)} ok, 0 missed, 0 failed, {len(finished)} skipped" in res.stdout
    assert sorted(p.name for p in out_dir.iterdir()) == [f"take{i}.bvh" for i in range(4)]


# -------------------------------------------------------------------- bench
def test_builtin_bench_reports_throughput(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "bench", "--frames", "2000", "--repeat", "1")
    assert code == 0
    assert "built-in quick benchmark" in out
    rows = [ln for ln in out.splitlines() if ln.startswith(("footlock", "forward kinematics"))]
    assert len(rows) == 2
    for row in rows:
        fps = float(row.split()[-2].replace(",", ""))
        assert fps > 0
    code, _, err = run(capsys, "bench", "--suite", "no/such/folder")
    assert code == 1 and "not found" in one_error_line(err)


def test_batch_convert_to_glb_in_metres(capsys: pytest.CaptureFixture[str], batch_inputs: Path,
                                        tmp_path: Path) -> None:
    out_dir = tmp_path / "glb"
    code, out, err = run(capsys, "batch", "convert", batch_inputs, "-o", out_dir, "--to", "glb", "--scale", "0.01",
                         "--workers", "1")
    assert code == 0, err
    assert "3 ok, 0 missed, 0 failed, 0 skipped" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["capture.glb", "run.glb", "walk.glb"]
    sk0, clip0 = load_bvh(batch_inputs / "capture.bvh")
    asset = load_gltf(out_dir / "capture.glb")
    clip1 = next(iter(asset.clips.values()))
    np.testing.assert_allclose(world(asset.skeleton, clip1), 0.01 * world(sk0, clip0), rtol=0, atol=1e-6)
    code, out, _ = run(capsys, "info", out_dir / "capture.glb")
    assert "metres" in out and "uneven" not in out


@pytest.mark.parametrize("argv", [("bench", "--frames", "0"), ("bench", "--repeat", "0")])
def test_bench_option_values_out_of_range_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
                                                            ) -> None:
    """A bad command line exits 2 (``kinema --help``'s exit statuses), as argparse's own errors: these exited 1."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and "must be at least" in err
