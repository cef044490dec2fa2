"""Bundled DeepMimic sample data: the URDF humanoid and its clips look right."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from kinema import forward_kinematics, samples
from kinema import rotation as R
from kinema.io import load_bvh

#: Bone lengths stay constant over a clip (FK of constant offsets) to this, float64 relative.
BONE_RTOL = 1e-9

JOINTS = ("root", "chest", "neck", "right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow",
          "left_wrist", "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle")


#: sha256 of the upstream copies (the project's shared data folder, taken from the pybullet 3.2.7 wheel):
#: the bundled files must stay byte for byte those, attribution included.
UPSTREAM_SHA256 = {
    "humanoid.urdf": "4a449f923dcbd242c1c6a3ad15e62047c6cb2fc1d275bf31a339bf60d27a6894",
    "humanoid3d_walk.txt": "32d082c3599bc40aac50b1afa196ff1e2cf3842bb40f0541ab088845f6328a41",
    "humanoid3d_run.txt": "2cbe488023b243e5769299158ce7c78875ec4b701a2ffe6c0beeaf83d16ca87b",
    "LICENSE.pybullet-zlib.txt": "885cd516a8420acb7c3e0b1a7119913b686495001ae564e3229740460e8cff59",
    "SOURCES.md": "20be7324fd84fa4662df2327f35692d0030aec89004c02075b64268ff0f974f9",
}


def test_bundled_files_match_upstream_and_keep_attribution() -> None:
    for name, digest in UPSTREAM_SHA256.items():
        assert hashlib.sha256(Path(samples.data_path(name)).read_bytes()).hexdigest() == digest, name
    with pytest.raises(FileNotFoundError):
        samples.data_path("test_mocapbank.bvh")  # the mocap fixture is never shipped
    assert not hasattr(samples, "sample_bvh_path")


def test_humanoid_skeleton_from_urdf() -> None:
    sk = samples.humanoid()
    assert sk.names == JOINTS
    assert sk.parents[sk.index("root")] == -1
    assert sk.names[sk.parents[sk.index("right_knee")]] == "right_hip"
    assert sk.names[sk.parents[sk.index("left_shoulder")]] == "chest"
    # origins times URDF_SCALE: right hip xyz = "0 0 0.339548", knee "0 -1.686184 0"
    np.testing.assert_allclose(sk.translations[sk.index("right_hip")], [0.0, 0.0, 0.339548 * 0.25], atol=1e-15)
    np.testing.assert_allclose(sk.translations[sk.index("left_knee")], [0.0, -1.686184 * 0.25, 0.0], atol=1e-15)
    np.testing.assert_allclose(sk.translations[sk.index("right_shoulder")],
                               np.array([-0.0962, 0.974, 0.73244]) * 0.25, atol=1e-15)
    types = dict(zip(sk.names, sk.meta["urdf_joint_type"], strict=True))
    assert types["right_knee"] == types["left_elbow"] == "revolute"
    assert types["right_wrist"] == types["root"] == "fixed"
    assert types["chest"] == "spherical"
    assert dict(zip(sk.names, sk.meta["urdf_axis"], strict=True))["left_knee"] == (0.0, 0.0, 1.0)
    np.testing.assert_array_equal(sk.rotations, np.tile([0.0, 0.0, 0.0, 1.0], (15, 1)))  # all rpy are zero


def _leg_length(sk) -> float:  # type: ignore[no-untyped-def]
    return float(np.linalg.norm(sk.translations[sk.index("right_knee")])
                 + np.linalg.norm(sk.translations[sk.index("right_ankle")]))


def test_walk_clip_looks_right() -> None:
    sk = samples.humanoid()
    clip = samples.clip("walk")
    assert clip.n_frames == 39
    assert clip.fps == pytest.approx(1 / 0.033332, rel=1e-12)
    assert clip.times is None
    p = forward_kinematics(sk, clip.pose).positions
    leg = _leg_length(sk)
    assert leg == pytest.approx(0.8314, abs=1e-3)  # metres: a human leg
    ankles = p[:, [sk.index("right_ankle"), sk.index("left_ankle")], 1]
    # the foot box of the URDF reaches 0.2 units = 5 cm below the ankle: ankles hover ~5 cm up
    assert 0.0 < ankles.min() < 0.1 * leg
    assert abs(ankles.min() - 0.05) < 0.01
    # each foot is planted (within 1 cm of the lowest) for part of the cycle and swings in the rest
    for k in range(2):
        low = ankles[:, k] < ankles[:, k].min() + 0.01
        assert 0.2 < low.mean() < 0.8
        assert ankles[:, k].max() > ankles[:, k].min() + 0.05
    # root: at hip height, moves forward along +X about a metre and a quarter, stays near z = 0
    root = p[:, sk.index("root")]
    assert np.all(np.abs(root[:, 1] - 0.86) < 0.05)
    assert root[-1, 0] - root[0, 0] == pytest.approx(1.23859, abs=1e-9)
    assert np.all(np.diff(root[:, 0]) > 0)
    assert np.abs(root[:, 2]).max() < 0.1
    # head above the chest above the root, every frame
    assert np.all(p[:, sk.index("neck"), 1] > p[:, sk.index("chest"), 1])
    assert np.all(p[:, sk.index("chest"), 1] > root[:, 1])
    # bones keep their lengths
    bl = sk.bone_lengths(clip.pose)
    np.testing.assert_allclose(bl, np.broadcast_to(sk.bone_lengths(), bl.shape), rtol=BONE_RTOL, atol=0)


@pytest.mark.parametrize("name", samples.CLIP_NAMES)
def test_knee_and_elbow_axes_match_the_clip(name: str) -> None:
    """SOURCES.md warns to check the URDF axes: with the +Z hinge the knees bend backwards
    (the knee ahead of the hip-ankle line) and the elbows forwards, as a person's do."""
    sk = samples.humanoid()
    clip = samples.clip(name)
    p = forward_kinematics(sk, clip.pose)
    forward = R.rotate(p.rotations[:, sk.index("root")], [1.0, 0.0, 0.0])  # the character faces its root's +X
    for side in ("right", "left"):
        hip, knee, ankle = (p.positions[:, sk.index(f"{side}_{j}")] for j in ("hip", "knee", "ankle"))
        ahead = np.einsum("fi,fi->f", knee - 0.5 * (hip + ankle), forward)
        bent = np.linalg.norm(ankle - hip, axis=-1) < 0.98 * _leg_length(sk)
        assert bent.sum() > 5
        assert np.all(ahead[bent] > 0.0)
        if name == "walk":  # arms hang in the walk (in the run they swing high, so world "back" means little)
            shoulder, elbow, wrist = (p.positions[:, sk.index(f"{side}_{j}")] for j in ("shoulder", "elbow", "wrist"))
            behind = np.einsum("fi,fi->f", elbow - 0.5 * (shoulder + wrist), forward)
            assert np.all(behind < 0.0)  # the elbow points back, the forearm comes forward


def test_clip_quaternions_are_the_file_values_reordered() -> None:
    sk = samples.humanoid()
    clip = samples.clip("walk")
    frames = np.array(json.loads(Path(samples.data_path("humanoid3d_walk.txt")).read_text())["Frames"])
    np.testing.assert_array_equal(clip.pose.translations[:, 0], frames[:, 1:4])
    wxyz = frames[:, 8:12]  # chest
    want = wxyz[:, [1, 2, 3, 0]] / np.linalg.norm(wxyz, axis=1, keepdims=True)
    np.testing.assert_allclose(clip.pose.rotations[:, sk.index("chest")], want, atol=1e-15)
    knee = frames[:, 20]  # right knee angle, radians, about +Z
    np.testing.assert_allclose(clip.pose.rotations[:, sk.index("right_knee")],
                               np.stack([0 * knee, 0 * knee, np.sin(knee / 2), np.cos(knee / 2)], axis=1), atol=1e-15)


def test_run_clip_moves_forward_faster_than_walk() -> None:
    sk = samples.humanoid()
    run = samples.clip("run")
    walk = samples.clip("walk")
    assert run.n_frames == 25
    speed = {}
    for name, c in (("run", run), ("walk", walk)):
        root = forward_kinematics(sk, c.pose).positions[:, 0]
        speed[name] = (root[-1, 0] - root[0, 0]) / c.duration
        # feet near the ground: no ankle more than 2 cm under it (the run's last frame dips to -7 mm:
        # DeepMimic data, the foot is striking), lowest ankle within 10% of the leg above it
        ankles = forward_kinematics(sk, c.pose).positions[:, [11, 14], 1]
        assert -0.02 < ankles.min() < 0.1 * _leg_length(sk)
    assert 0.8 < speed["walk"] < 1.8  # m/s
    assert speed["run"] > 2.0 * speed["walk"]


def test_unknown_clip_name() -> None:
    with pytest.raises(ValueError, match="walk, run"):
        samples.clip("dance")


def test_sample_bvh_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "walk.bvh"
    samples.save_sample_bvh(out, "walk")
    sk_b, clip_b = load_bvh(out)
    sk = samples.humanoid()
    clip = samples.clip("walk")
    assert sk_b.names == sk.names
    assert sk_b.meta["bvh_channels"][0][:3] == ("Xposition", "Yposition", "Zposition")
    np.testing.assert_allclose(forward_kinematics(sk_b, clip_b.pose).positions,
                               forward_kinematics(sk, clip.pose).positions, rtol=0, atol=1e-6)
    assert clip_b.fps == pytest.approx(clip.fps, rel=1e-8)
