"""Writers refuse what they cannot write, never write what their reader refuses and never overwrite
their input; readers refuse, before allocating, what a small file cannot honestly ask for."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from _io_mutate import GOOD_BVH
from kinema import Clip, FileFormatError, Pose, ShapeError, Skeleton, SkeletonError, SolverInputError
from kinema.io import bone_mesh, load_bvh, load_gltf, save_bvh, save_gltf
from kinema.io._bvh import MAX_INDENT
from kinema.io.gltf.load import MAX_MATERIAL_DEPTH

#: GOOD_BVH with no frames.
ZERO_FRAMES_BVH = GOOD_BVH.split("Frames:")[0] + "Frames: 0\nFrame Time: 0.04\n"


def _two_joints(name: str) -> tuple[Skeleton, Clip]:
    sk = Skeleton(["root", name], [-1, 0], np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    t = np.broadcast_to(sk.translations, (2, 2, 3)).copy()
    r = np.zeros((2, 2, 4))
    r[..., 3] = 1.0
    return sk, Clip(Pose(t, r), fps=30.0)


def test_zero_frame_clip_has_zero_duration(tmp_path: Path) -> None:
    (tmp_path / "z.bvh").write_text(ZERO_FRAMES_BVH)
    _, clip = load_bvh(tmp_path / "z.bvh")
    assert clip.n_frames == 0
    assert clip.duration == 0.0
    empty = Clip(Pose(np.zeros((0, 1, 3)), np.zeros((0, 1, 4))), fps=30.0, times=np.zeros(0))
    assert empty.duration == 0.0


@pytest.mark.parametrize("ext", [".glb", ".gltf"])
def test_zero_frame_bvh_to_gltf_writes_the_skeleton(tmp_path: Path, ext: str) -> None:
    (tmp_path / "z.bvh").write_text(ZERO_FRAMES_BVH)
    sk, clip = load_bvh(tmp_path / "z.bvh")
    save_gltf(tmp_path / f"z{ext}", sk, clip)
    asset = load_gltf(tmp_path / f"z{ext}")
    assert asset.skeleton.names == sk.names
    np.testing.assert_allclose(asset.skeleton.translations, sk.translations)
    assert asset.clips == {}


@pytest.mark.parametrize("name", ["a{", "x {", "{", "a}b"])
def test_save_bvh_refuses_names_with_braces(tmp_path: Path, name: str) -> None:
    sk, clip = _two_joints(name)
    with pytest.raises(SkeletonError, match="braces") as info:
        save_bvh(tmp_path / "x.bvh", sk, clip)
    assert repr(name) in str(info.value)
    assert list(tmp_path.iterdir()) == []
    sk, clip = _two_joints("left upper\tarm")  # inner spaces: the reader takes the rest of the line
    save_bvh(tmp_path / "x.bvh", sk, clip)
    assert load_bvh(tmp_path / "x.bvh")[0].names == sk.names


def test_save_bvh_refuses_lone_surrogate_names(tmp_path: Path) -> None:
    sk, clip = _two_joints("\ud800Bone")
    with pytest.raises(SkeletonError, match="Bone"):
        save_bvh(tmp_path / "x.bvh", sk, clip)
    assert list(tmp_path.iterdir()) == []


def test_save_gltf_refuses_values_beyond_float32(tmp_path: Path) -> None:
    big = Skeleton(["root", "far"], [-1, 0], np.array([[0.0, 0.0, 0.0], [0.0, 1e308, 0.0]]))
    with pytest.raises(SolverInputError, match="float32") as info:
        save_gltf(tmp_path / "big.glb", big, None)
    assert "'far'" in str(info.value)
    sk, clip = _two_joints("b")
    t = clip.pose.translations.copy()
    t[1, 1, 0] = 1e39
    with pytest.raises(SolverInputError, match="float32") as info:
        save_gltf(tmp_path / "big.gltf", sk, Clip(Pose(t, clip.pose.rotations), fps=30.0))
    assert "'b'" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_bvh_joints_times_frames_budget_refused_before_allocating(tmp_path: Path) -> None:
    """300 channel-less joints, one channel, 6000 frames: a 24 KB file asking for 100 MB of pose arrays."""
    joints = "".join(f"JOINT j{k}\n{{\nOFFSET 0 0 0\n}}\n" for k in range(300))
    text = ("HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 1 Xposition\n" + joints + "}\nMOTION\n"
            "Frames: 6000\nFrame Time: 0.04\n" + "0\n" * 6000)
    path = tmp_path / "wide.bvh"
    path.write_text(text)
    frames_line = text.split("Frames:")[0].count("\n") + 1
    tracemalloc.start()
    try:
        with pytest.raises(FileFormatError, match="joints need") as info:
            load_bvh(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.path == str(path) and info.value.line == frames_line
    assert peak < 20 << 20


def test_save_bvh_refuses_to_overwrite_its_source(tmp_path: Path) -> None:
    src = tmp_path / "a.bvh"
    src.write_text(GOOD_BVH)
    sk, clip = load_bvh(src)
    with pytest.raises(FileExistsError):
        save_bvh(src, sk, clip, scale=0.01)
    assert src.read_text() == GOOD_BVH
    assert sk.meta["source"] == os.path.realpath(src)
    save_bvh(tmp_path / "b.bvh", sk, clip)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bvh", "b.bvh"]


def test_save_bvh_deep_chain_is_linear_in_size(tmp_path: Path) -> None:
    n = 2000
    sk = Skeleton([f"j{k}" for k in range(n)], list(range(-1, n - 1)), np.tile([0.0, 1.0, 0.0], (n, 1)))
    clip = Clip(Pose(sk.translations[None].copy(), sk.rotations[None].copy()), fps=30.0)
    out = tmp_path / "deep.bvh"
    save_bvh(out, sk, clip)
    assert out.stat().st_size < n * (4 * (MAX_INDENT + 2) + 150)
    sk2, _ = load_bvh(out)
    assert sk2.names == sk.names and np.array_equal(sk2.parents, sk.parents)


def test_deeply_nested_material_extras_refused_with_json_path(tmp_path: Path) -> None:
    sk, clip = _two_joints("b")
    save_gltf(tmp_path / "m.gltf", sk, clip, mesh="bones")
    doc = json.loads((tmp_path / "m.gltf").read_text())
    shallow: object = 1
    for _ in range(10):
        shallow = {"k": [shallow]}
    doc["materials"][0]["extras"] = shallow
    (tmp_path / "ok.gltf").write_text(json.dumps(doc))
    mesh = load_gltf(tmp_path / "ok.gltf").mesh
    assert mesh is not None and mesh.material is not None and mesh.material["extras"] == shallow
    deep: object = 1
    for _ in range(495):
        deep = {"k": deep}
    doc["materials"][0]["extras"] = deep
    (tmp_path / "deep.gltf").write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=f"deeper than {MAX_MATERIAL_DEPTH}") as info:
        load_gltf(tmp_path / "deep.gltf")
    assert str(info.value.line).startswith("materials[0].extras.k.k")


# ------------------------------------------------------------ external buffers are inputs
def _external_buffer_gltf(folder: Path, bin_name: str, copies: int = 1) -> Path:
    """The humanoid walk as a .gltf whose buffer is the file ``bin_name`` beside it, listed ``copies`` times."""
    import base64

    import kinema

    gltf = folder / "model.gltf"
    save_gltf(gltf, kinema.samples.humanoid(), {"walk": kinema.samples.clip("walk")}, mesh=False)
    doc = json.loads(gltf.read_text())
    (folder / bin_name).write_bytes(base64.b64decode(doc["buffers"][0]["uri"].split(",", 1)[1]))
    doc["buffers"] = [dict(doc["buffers"][0], uri=bin_name) for _ in range(copies)]
    for k, view in enumerate(doc["bufferViews"]):  # spread the views over the buffer entries
        view["buffer"] = k % copies
    gltf.write_text(json.dumps(doc))
    return gltf


def test_a_gltf_external_buffer_is_an_input_no_writer_replaces(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The file a .gltf's buffer lives in is an input like the .gltf: save_gltf, save_bvh and ``kinema convert``
    refuse to write over it (once, ``convert model.gltf buf.glb --force`` replaced it and broke the model)."""
    from _cli import run

    gltf = _external_buffer_gltf(tmp_path, "buf.glb")
    before = (tmp_path / "buf.glb").read_bytes()
    asset = load_gltf(gltf)
    assert asset.skeleton.meta["source_files"] == (str((tmp_path / "buf.glb").resolve()),)
    with pytest.raises(FileExistsError):
        save_gltf(tmp_path / "buf.glb", asset.skeleton, asset.clips)
    code, _, err = run(capsys, "convert", gltf, tmp_path / "buf.glb", "--force")
    assert code == 1 and "input" in err, err
    assert (tmp_path / "buf.glb").read_bytes() == before
    assert load_gltf(gltf).clips["walk"].n_frames == asset.clips["walk"].n_frames  # the model still loads


def test_buffers_sharing_a_file_read_it_once(tmp_path: Path) -> None:
    """Forty buffer entries naming one file: it is read once (the decoding budget grows once), and the clip is the
    same as with one entry.  (Each entry used to read the whole file again: 40 copies in memory.)"""
    from kinema.io.gltf import reader

    one = load_gltf(_external_buffer_gltf(tmp_path, "one.bin"))
    reads: list[str] = []
    real = reader.read_regular

    def counting(path: str, **kw: object) -> bytes:
        reads.append(path)
        return real(path, **kw)  # type: ignore[arg-type]

    reader.read_regular = counting  # type: ignore[assignment]
    try:
        many = load_gltf(_external_buffer_gltf(tmp_path, "one.bin", copies=40))
    finally:
        reader.read_regular = real
    assert [p for p in reads if p.endswith("one.bin")] == [str((tmp_path / "one.bin").resolve())]
    np.testing.assert_array_equal(many.clips["walk"].pose.rotations, one.clips["walk"].pose.rotations)


# ------------------------------------------------------------ BVH End Site names
_END_THEN_JOINT = """HIERARCHY
ROOT Hips
{
\tOFFSET 0 0 0
\tCHANNELS 3 Xposition Yposition Zposition
\tJOINT Head
\t{
\t\tOFFSET 0 1 0
\t\tCHANNELS 3 Zrotation Xrotation Yrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 0.5 0
\t\t}
\t}
\tJOINT Head_End
\t{
\t\tOFFSET 1 0 0
\t\tCHANNELS 3 Zrotation Xrotation Yrotation
\t}
}
MOTION
Frames: 1
Frame Time: 0.0333333
0 0 0 0 0 0 0 0 0
"""


def test_an_end_site_name_yields_to_a_later_joint_of_that_name(tmp_path: Path) -> None:
    """End Sites have no name in a BVH file: kinema makes one up (``Head_End``).  A later JOINT that really is
    called ``Head_End`` keeps its name and the End Site takes the next free one (the file was refused as naming
    a joint twice); saved and read again, the names are the same.  A joint name really used twice is refused."""
    path = tmp_path / "end_then_joint.bvh"
    path.write_text(_END_THEN_JOINT)
    sk, clip = load_bvh(path)
    assert sk.names == ("Hips", "Head", "Head_End2", "Head_End")
    assert sk.meta["bvh_end_site"] == (False, False, True, False)
    save_bvh(tmp_path / "again.bvh", sk, clip)
    assert load_bvh(tmp_path / "again.bvh")[0].names == sk.names
    twice = tmp_path / "twice.bvh"
    twice.write_text(_END_THEN_JOINT.replace("JOINT Head_End", "JOINT Head"))
    with pytest.raises(FileFormatError, match="used twice"):
        load_bvh(twice)


@pytest.mark.parametrize("sep", ["\r", "\r\n"])
def test_motion_errors_name_the_same_line_whatever_ends_the_lines(tmp_path: Path, sep: str) -> None:
    """A truncated MOTION and a short frame name the same line and say the same thing with CR-only or CRLF line
    ends as with LF (the line counts outside the scanner counted LF only: CR-only files got wrong lines and a
    short frame was called a truncation)."""
    import kinema

    good = tmp_path / "walk.bvh"
    save_bvh(good, kinema.samples.humanoid(), kinema.samples.clip("walk"))
    head, motion = good.read_text().split("MOTION\n")
    rows = motion.splitlines()  # Frames:, Frame Time:, then the frames
    short = " ".join(rows[3].split()[:3])
    for body in (rows[:2] + rows[2:5], rows[:2] + [rows[2], short] + rows[4:]):
        text = head + "MOTION\n" + "\n".join(body) + "\n"
        messages = []
        for ends in ("\n", sep):
            path = tmp_path / "cut.bvh"
            path.write_bytes(text.replace("\n", ends).encode())
            with pytest.raises(FileFormatError) as info:
                load_bvh(path)
            messages.append(str(info.value))
        assert messages[0] == messages[1]


@pytest.mark.parametrize("ext", [".bvh", ".glb"])
def test_input_check_holds_whatever_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           ext: str) -> None:
    # Loaded by a relative name, the input stays refused (and only it) after a chdir.
    a, b = tmp_path / "A", tmp_path / "B"
    a.mkdir()
    b.mkdir()
    sk0, clip0 = _two_joints("tip")
    save = save_bvh if ext == ".bvh" else save_gltf
    save(a / f"x{ext}", sk0, clip0)
    original = (a / f"x{ext}").read_bytes()
    monkeypatch.chdir(a)
    if ext == ".bvh":
        sk, clip = load_bvh(f"x{ext}")
    else:
        asset = load_gltf(f"x{ext}")
        sk, clip = asset.skeleton, asset.clips["clip"]
    assert sk.meta["source"] == os.path.realpath(a / f"x{ext}")
    monkeypatch.chdir(b)
    with pytest.raises(FileExistsError, match="input"):
        save(a / f"x{ext}", sk, clip)
    assert (a / f"x{ext}").read_bytes() == original
    save(b / f"x{ext}", sk, clip)  # same relative name, another file: written
    save(f"x{ext}", sk, clip)
    assert sorted(p.name for p in b.iterdir()) == [f"x{ext}"]


def test_save_gltf_refuses_a_clip_with_two_batch_dimensions(tmp_path: Path) -> None:
    sk, clip = _two_joints("tip")
    t = np.broadcast_to(sk.translations, (2, 3, 2, 3)).copy()  # 2 frames of 3 characters
    r = np.zeros((2, 3, 2, 4))
    r[..., 3] = 1.0
    with pytest.raises(ShapeError, match="one time dimension") as info:
        save_gltf(tmp_path / "b.glb", sk, {"walk": Clip(Pose(t, r), fps=30.0)})
    assert "(2, 3, 2, 'k')" in str(info.value) and "'walk'" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_save_gltf_refuses_names_load_gltf_cannot_read(tmp_path: Path) -> None:
    sk, clip = _two_joints("tip")
    with pytest.raises(SolverInputError, match="clip names must be strings, got 1 "):
        save_gltf(tmp_path / "n.glb", sk, {1: clip})  # type: ignore[dict-item]
    mesh = dataclasses.replace(bone_mesh(sk), name=7)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match="mesh name must be a string, got 7 "):
        save_gltf(tmp_path / "n.glb", sk, clip, mesh=mesh)
    assert list(tmp_path.iterdir()) == []


def test_writers_refuse_wrong_argument_types(tmp_path: Path) -> None:
    sk, clip = _two_joints("tip")
    with pytest.raises(SolverInputError, match="clips must be a Clip, a mapping .* got a list"):
        save_gltf(tmp_path / "x.glb", sk, [clip])  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match=r"clips\['walk'\] is a Pose"):
        save_gltf(tmp_path / "x.glb", sk, {"walk": clip.pose})  # type: ignore[dict-item]
    with pytest.raises(SolverInputError, match="mesh must be a SkinnedMesh.* got a int"):
        save_gltf(tmp_path / "x.glb", sk, clip, mesh=1)  # type: ignore[arg-type]
    mesh = dataclasses.replace(bone_mesh(sk), material=["red"])  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match="material must be a dict .* got a list"):
        save_gltf(tmp_path / "x.glb", sk, clip, mesh=mesh)
    with pytest.raises(SolverInputError, match="save_gltf: skeleton must be a kinema.Skeleton, got str"):
        save_gltf(tmp_path / "x.glb", "sk", clip)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match="clip must be a kinema.Clip, got a Pose"):
        save_bvh(tmp_path / "x.bvh", sk, clip.pose)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match="save_bvh: skeleton must be a kinema.Skeleton, got NoneType"):
        save_bvh(tmp_path / "x.bvh", None, clip)  # type: ignore[arg-type]
    for bad in (True, np.bool_(True), 3.0, 18, np.int64(-1)):
        with pytest.raises(SolverInputError, match="precision must be an int"):
            save_bvh(tmp_path / "x.bvh", sk, clip, precision=bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    # A numpy integer is an integer: the same file as the int.
    save_bvh(tmp_path / "np.bvh", sk, clip, precision=np.int64(3))  # type: ignore[arg-type]
    save_bvh(tmp_path / "int.bvh", sk, clip, precision=3)
    assert (tmp_path / "np.bvh").read_bytes() == (tmp_path / "int.bvh").read_bytes()


@pytest.mark.parametrize("stem", ["a" * 246, "\u00e9" * 123, "b" * 251])
def test_a_long_legal_destination_name_is_writable(tmp_path: Path, stem: str) -> None:
    # Up to 255 bytes in all: the temporary name's extra characters must not make it too long.
    name = stem + ".bvh"
    assert len(os.fsencode(name)) <= 255
    sk, clip = _two_joints("tip")
    save_bvh(tmp_path / name, sk, clip)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    from kinema.io._atomic import _temp_name, is_temp_name

    tmp = _temp_name(name, f".{4194304}-{'f' * 16}.tmp", 255)
    # Cut at whole characters (an e-acute is 2 bytes): at most one byte short of the limit.
    assert 254 <= len(os.fsencode(tmp)) <= 255 and is_temp_name(tmp) and tmp.startswith("." + stem[:100])


def test_write_errors_name_the_destination_not_the_temporary_file(tmp_path: Path) -> None:
    sk, clip = _two_joints("tip")
    too_long = tmp_path / ("a" * 300 + ".bvh")  # the final rename fails (ENAMETOOLONG)
    with pytest.raises(OSError) as info:
        save_bvh(too_long, sk, clip)
    assert info.value.errno == errno.ENAMETOOLONG
    assert info.value.filename == str(too_long) and info.value.filename2 is None
    assert list(tmp_path.iterdir()) == []
    if sys.platform.startswith("linux") and os.path.isdir("/proc/self"):
        with pytest.raises(OSError) as info:  # the temporary file cannot be created
            save_bvh("/proc/out.bvh", sk, clip)
        assert info.value.filename == "/proc/out.bvh"


@pytest.mark.parametrize("frame_time", ["0.00833333333333333333333333", "0.0333333", "0.04", "0.016666666666666666"])
def test_bvh_frame_time_survives_a_round_trip(tmp_path: Path, frame_time: str) -> None:
    """The Frame Time is written with the digits that read back as the same number: a clip read, saved and read
    again has the same fps bit for bit (9 significant digits turned 120 fps into 120.000000048)."""
    src = tmp_path / "a.bvh"
    src.write_text(GOOD_BVH.replace("Frame Time: 0.04", f"Frame Time: {frame_time}"))
    sk, clip = load_bvh(src)[:2]
    save_bvh(tmp_path / "b.bvh", sk, clip)
    assert load_bvh(tmp_path / "b.bvh")[1].fps == clip.fps == 1.0 / float(frame_time)
