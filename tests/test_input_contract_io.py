"""Input contract of forward kinematics, kinema.rotation, Rig steps, the samples and kinema.io: boolean options
are True or False (``check_flag``), paths are str or os.PathLike, numbers are the numbers they hold (NumPy's and
0-d arrays too) and nothing else, and every refusal is a kinema error naming the argument."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
import kinema.rotation as R
from kinema import samples
from kinema.errors import KinemaError, ShapeError, SolverInputError
from kinema.io import load_bvh, load_gltf, save_bvh, save_gltf
from kinema.io._atomic import atomic_write
from kinema.io.gltf.reader import read_external

#: Values a boolean option refuses: truthiness read "False" and 1 as True, 0 and None as False, and an array
#: raised NumPy's bare ValueError.
NOT_FLAGS = ["False", "no", 0, 1, None, np.array([True, False])]

#: Values a path refuses (os raised a bare TypeError for each), with the type the message names.
NOT_PATHS = [(None, "NoneType"), (5, "int"), (["a.bvh"], "list"), (b"a.bvh", "bytes")]


@pytest.fixture(scope="module")
def walk() -> tuple[kinema.Skeleton, kinema.Clip]:
    clip = samples.clip("walk")
    return samples.humanoid(), kinema.Clip(clip.pose[:4], clip.fps)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, walk: tuple[kinema.Skeleton, kinema.Clip]) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("contract")
    sk, clip = walk
    bvh, glb = folder / "a.bvh", folder / "a.glb"
    save_bvh(bvh, sk, clip)
    save_gltf(glb, sk, clip)
    return {"bvh": bvh, "glb": glb, "folder": folder}


# ============================================================== boolean options
def _rig(layer: Any) -> kinema.Rig:
    sk = samples.humanoid()
    arm = kinema.TwoBone(sk, ("right_shoulder", "right_elbow", "right_wrist"))
    leg = kinema.CCD(sk, ("root", "left_ankle"))  # moves the root, an ancestor of the arm's joints
    return kinema.Rig(sk, [kinema.Step("arm", arm), kinema.Step("leg", leg, layer=layer)])


_Q = np.array([0.1, -0.2, 0.3, 0.9])
#: (option name, call with that option): every boolean option of the files under test.
FLAG_CALLS = [
    ("matrices", lambda v: kinema.forward_kinematics(samples.humanoid(), samples.humanoid().rest_pose(), matrices=v)),
    ("degrees", lambda v: R.from_axis_angle([0.0, 0.0, 1.0], 90.0, degrees=v)),
    ("degrees", lambda v: R.as_axis_angle(_Q, degrees=v)),
    ("degrees", lambda v: R.from_rotvec([0.1, 0.2, 0.3], degrees=v)),
    ("degrees", lambda v: R.as_rotvec(_Q, degrees=v)),
    ("degrees", lambda v: R.from_euler("ZXY", [10.0, 20.0, 30.0], degrees=v)),
    ("degrees", lambda v: R.as_euler(_Q, "ZXY", degrees=v)),
    ("step 'leg': layer", _rig),
    ("hands", lambda v: samples.humanoid(hands=v)),
]


@pytest.mark.parametrize("name,call", FLAG_CALLS, ids=[f"{i}-{n}" for i, (n, _) in enumerate(FLAG_CALLS)])
@pytest.mark.parametrize("value", NOT_FLAGS, ids=repr)
def test_a_boolean_option_other_than_true_or_false_is_refused(name: str, call: Any, value: Any) -> None:
    with pytest.raises(SolverInputError, match=f"^{name} must be True or False, got "):
        call(value)


def _same(a: Any, b: Any) -> bool:
    """Bit-identical results (arrays, tuples of arrays, None, an FKResult's fields)."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, kinema.FKResult):
        return all(_same(getattr(a, f), getattr(b, f)) for f in ("positions", "rotations", "scales", "matrices"))
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("call", [c for n, c in FLAG_CALLS if n in ("matrices", "degrees")])
def test_numpy_bools_are_the_options_they_hold(call: Any) -> None:
    for flag in (True, False):
        assert _same(call(np.bool_(flag)), call(flag))
    assert not _same(call(True), call(False))  # the option changes the result: the test can tell


def test_layer_false_as_a_string_no_longer_switches_the_ownership_check_off() -> None:
    with pytest.raises(SolverInputError, match="an ancestor of joints step 'arm' claims"):
        _rig(False)
    with pytest.raises(SolverInputError, match="an ancestor of joints step 'arm' claims"):
        _rig(np.False_)
    assert _rig(True).moved["leg"] == _rig(np.True_).moved["leg"]
    with pytest.raises(SolverInputError, match="step 'leg': layer must be True or False, got 'False'"):
        _rig("False")


def test_humanoid_hands_reads_numpy_bools() -> None:
    assert samples.humanoid(hands=np.True_).n_joints == samples.humanoid(hands=True).n_joints == 55
    assert samples.humanoid(hands=np.False_).n_joints == 15


@pytest.mark.parametrize("value", NOT_FLAGS, ids=repr)
def test_overwrite_other_than_true_or_false_leaves_the_file_alone(
        tmp_path: Path, walk: tuple[kinema.Skeleton, kinema.Clip], value: Any) -> None:
    sk, clip = walk
    out = tmp_path / "b.bvh"
    out.write_bytes(b"keep me")
    with pytest.raises(SolverInputError, match="^overwrite must be True or False"):
        save_bvh(out, sk, clip, overwrite=value)
    with pytest.raises(SolverInputError, match="^overwrite must be True or False"):
        with atomic_write(out, overwrite=value) as f:
            f.write(b"replaced")
    assert out.read_bytes() == b"keep me" and sorted(os.listdir(tmp_path)) == ["b.bvh"]


def test_overwrite_reads_numpy_bools_and_stays_a_file_exists_error(
        tmp_path: Path, walk: tuple[kinema.Skeleton, kinema.Clip]) -> None:
    sk, clip = walk
    out = tmp_path / "b.bvh"
    out.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        save_bvh(out, sk, clip, overwrite=np.False_)
    assert out.read_bytes() == b"keep me"
    save_bvh(out, sk, clip, overwrite=np.True_)
    save_bvh(tmp_path / "c.bvh", sk, clip)
    assert out.read_bytes() == (tmp_path / "c.bvh").read_bytes()


def test_save_gltf_mesh_reads_numpy_bools(tmp_path: Path, walk: tuple[kinema.Skeleton, kinema.Clip]) -> None:
    sk, clip = walk
    save_gltf(tmp_path / "np.glb", sk, clip, mesh=np.False_)
    save_gltf(tmp_path / "py.glb", sk, clip, mesh=False)
    assert (tmp_path / "np.glb").read_bytes() == (tmp_path / "py.glb").read_bytes()


# ============================================================== kinema.rotation: shapes and subclasses
#: (call, argument names) of every rotation function taking two or more array arguments, given batches
#: (2,) and (3,) that do not broadcast.
def _q(n: int) -> np.ndarray:
    return np.tile(_Q, (n, 1))


def _v(n: int) -> np.ndarray:
    return np.tile([0.3, 0.4, 1.0], (n, 1))


TWO_ARGS = [
    (lambda: R.multiply(_q(2), _q(3)), "a and b", "a (2,) vs b (3,)"),
    (lambda: R.equal(_q(2), _q(3)), "a and b", "a (2,) vs b (3,)"),
    (lambda: R.angle_between(_q(2), _q(3)), "a and b", "a (2,) vs b (3,)"),
    (lambda: R.rotate(_q(2), _v(3)), "q and v", "q (2,) vs v (3,)"),
    (lambda: R.from_two_vectors(_v(2), _v(3)), "a and b", "a (2,) vs b (3,)"),
    (lambda: R.swing_twist(_q(2), _v(3)), "q and axis", "q (2,) vs axis (3,)"),
    (lambda: R.from_axis_angle(_v(2), np.zeros(3)), "axis and angle", "axis (2,) vs angle (3,)"),
    (lambda: R.slerp(_q(2), _q(2), np.zeros(3)), "a, b and t", "a (2,) vs b (2,) vs t (3,)"),
    (lambda: R.nlerp(_q(2), _q(3), 0.5), "a, b and t", "a (2,) vs b (3,) vs t ()"),
]


@pytest.mark.parametrize("call,names,got", TWO_ARGS, ids=[t[1] + str(i) for i, t in enumerate(TWO_ARGS)])
def test_batches_that_do_not_broadcast_are_a_shape_error_naming_the_arguments(call: Any, names: str, got: str) -> None:
    with pytest.raises(ShapeError) as info:
        call()
    assert str(info.value) == f"batch dimensions of {names}: expected shape broadcastable batch shapes, got {got}"


def test_equal_names_its_arguments_and_still_broadcasts() -> None:
    with pytest.raises(ShapeError, match=r"^b: expected shape \(\.\.\., 4\), got \(3,\)$"):
        R.equal(_q(2), np.zeros(3))
    with pytest.raises(ShapeError, match=r"^a: expected shape \(\.\.\., 4\), got \(3,\)$"):
        R.equal(np.zeros(3), _q(2))
    with pytest.raises(SolverInputError, match="^b contains NaN or inf"):
        R.equal(_Q, [0.0, 0.0, np.nan, 1.0])
    # (1,) against (3,) broadcasts; -q is the same rotation; a 1e-3 change is not (atol 1e-9)
    other = -_q(3)
    other[1, 0] += 1e-3
    np.testing.assert_array_equal(R.equal(_q(1), other), [True, False, True])
    assert R.equal(_Q, -_Q) is True


#: Rotation functions of one quaternion (and their extra arguments).
ONE_QUAT = [R.conjugate, R.inverse, R.normalize, R.canonical, R.as_matrix, R.as_rotvec,
            lambda q: R.as_euler(q, "ZXY"), lambda q: R.rotate(q, [1.0, 2.0, 3.0]), lambda q: R.multiply(q, q)]


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("fn", ONE_QUAT)
@pytest.mark.parametrize("q", [[0.0, 0.0, 0.0, 1.0], [0.1, -0.2, 0.3, 0.9], [-0.0, 0.5, -0.5, 0.5]])
def test_a_matrix_subclass_gives_the_plain_arrays_result(fn: Any, q: list[float]) -> None:
    m = np.matrix([q])
    got, want = fn(m), fn(np.array([q]))
    assert type(got) is np.ndarray and _same(got, want)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_conjugate_of_a_matrix_keeps_the_sign_of_zero() -> None:
    c = R.conjugate(np.matrix([[0.0, 0.0, 0.0, 1.0]]))
    assert type(c) is np.ndarray and c.shape == (1, 4)
    np.testing.assert_array_equal(np.signbit(c), [[True, True, True, False]])


# ============================================================== kinema.io: paths
def _path_calls(files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip]) -> list[tuple[str, Any]]:
    sk, clip = walk
    return [
        ("load_bvh", lambda p: load_bvh(p)),
        ("save_bvh", lambda p: save_bvh(p, sk, clip)),
        ("load_gltf", lambda p: load_gltf(p)),
        ("save_gltf", lambda p: save_gltf(p, sk, clip)),
        ("save_sample_bvh", lambda p: samples.save_sample_bvh(p)),
        ("read_external", lambda p: read_external(p, files["glb"].read_bytes())),
    ]


@pytest.mark.parametrize("value,kind", NOT_PATHS, ids=[k for _, k in NOT_PATHS])
def test_a_path_that_is_no_path_is_a_solver_input_error_naming_path(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip], value: Any, kind: str) -> None:
    for what, call in _path_calls(files, walk):
        with pytest.raises(SolverInputError) as info:
            call(value)
        assert str(info.value) == f"path must be a str or os.PathLike, got {kind}", what


def test_a_nul_character_in_the_path_is_a_kinema_error_naming_the_path(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip]) -> None:
    folder = files["folder"]
    before = sorted(os.listdir(folder))
    for ext in ("bvh", "glb"):
        bad = str(folder / f"x\0.{ext}")
        for what, call in _path_calls(files, walk):
            for p in (bad, Path(bad)):
                with pytest.raises(KinemaError) as info:
                    call(p)
                assert isinstance(info.value, SolverInputError), what
                assert str(info.value) == f"path {bad!r} holds a NUL character, which no file path can", what
    assert sorted(os.listdir(folder)) == before  # nothing written


def test_missing_files_folders_and_overwrite_false_stay_os_errors(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip]) -> None:
    sk, clip = walk
    folder = files["folder"]
    with pytest.raises(FileNotFoundError):
        load_bvh(folder / "missing.bvh")
    with pytest.raises(FileNotFoundError):
        load_gltf(str(folder / "missing.glb"))
    with pytest.raises(IsADirectoryError):
        save_bvh(folder, sk, clip)
    with pytest.raises(FileExistsError):
        save_bvh(files["bvh"], sk, clip, overwrite=False)


# ============================================================== kinema.io: options
@pytest.mark.parametrize("scale", ["2", "abc", True, np.True_, None, [2.0], np.array([2.0]), complex(2.0)],
                         ids=repr)
def test_scale_that_is_not_a_number_is_refused(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip], scale: Any) -> None:
    sk, clip = walk
    with pytest.raises(SolverInputError, match="^scale must be a positive finite number, got "):
        load_bvh(files["bvh"], scale=scale)
    out = files["folder"] / "scaled.bvh"
    with pytest.raises(SolverInputError, match="^scale must be a positive finite number, got "):
        save_bvh(out, sk, clip, scale=scale)
    assert not out.exists()


@pytest.mark.parametrize("scale", [np.float32(2.0), np.float64(2.0), np.int64(2), np.array(2.0), np.array(2),
                                   np.array(2.0, dtype=">f8"), 2])
def test_scale_reads_numpy_numbers_and_0d_arrays(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip], scale: Any) -> None:
    sk, clip = walk
    want_sk, want_clip = load_bvh(files["bvh"], scale=2.0)
    got_sk, got_clip = load_bvh(files["bvh"], scale=scale)
    assert _same(got_sk.translations, want_sk.translations)
    assert _same(got_clip.pose.translations, want_clip.pose.translations)
    folder = files["folder"]
    save_bvh(folder / "want.bvh", sk, clip, scale=2.0)
    save_bvh(folder / "got.bvh", sk, clip, scale=scale)
    assert (folder / "got.bvh").read_bytes() == (folder / "want.bvh").read_bytes()


def test_fps_reads_a_0d_array_as_its_number(files: dict[str, Path]) -> None:
    want = load_gltf(files["glb"], fps=24.0).clips
    for fps in (np.array(24.0), np.array(24), np.float32(24.0), np.array(24.0, dtype=">f8")):
        got = load_gltf(files["glb"], fps=fps).clips
        assert got.keys() == want.keys()
        for name, clip in got.items():
            assert clip.fps == want[name].fps == 24.0 and clip.times is None
            assert _same(clip.pose.rotations, want[name].pose.rotations)
    for bad in (np.array([24.0]), np.array("24"), np.array(True), np.array(0.0), np.array(np.nan)):
        with pytest.raises(SolverInputError, match="^load_gltf: fps must be a positive finite number or None"):
            load_gltf(files["glb"], fps=bad)


def test_skin_reads_a_0d_array_as_its_index(files: dict[str, Path]) -> None:
    want = load_gltf(files["glb"], skin=0)
    got = load_gltf(files["glb"], skin=np.array(0))
    assert got.skin == want.skin == 0 and got.skeleton.names == want.skeleton.names


@pytest.mark.parametrize("external", ["x", {}, 0, [("a.bin", b"")]], ids=repr)
def test_external_of_the_wrong_type_is_a_solver_input_error(files: dict[str, Path], external: Any) -> None:
    with pytest.raises(SolverInputError, match="^load_gltf: external must be the ExternalFiles of read_external"):
        load_gltf(files["glb"], external=external)


def test_precision_reads_a_0d_int_array_and_rotation_order_must_be_a_string(
        files: dict[str, Path], walk: tuple[kinema.Skeleton, kinema.Clip]) -> None:
    sk, clip = walk
    folder = files["folder"]
    save_bvh(folder / "p3.bvh", sk, clip, precision=3)
    save_bvh(folder / "p3a.bvh", sk, clip, precision=np.array(3))
    assert (folder / "p3a.bvh").read_bytes() == (folder / "p3.bvh").read_bytes()
    for bad in (np.array(3.0), np.array([3]), np.True_):
        with pytest.raises(SolverInputError, match="^precision must be an int in"):
            save_bvh(folder / "p.bvh", sk, clip, precision=bad)
    with pytest.raises(SolverInputError, match="^rotation_order must be an intrinsic Tait-Bryan sequence"):
        save_bvh(folder / "p.bvh", sk, clip, rotation_order=np.array(["ZXY", "XYZ"]))
    assert not (folder / "p.bvh").exists()
