"""Unit tests of the viewer's server-side state (no browser): kinema.viewer.ViewerState and its geometry."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _viewer_files import tree

import kinema
from kinema import FileFormatError, SolverInputError, forward_kinematics, rotation
from kinema.limits import EulerRange, Hinge, SwingTwist
from kinema.viewer import SOLVERS, ViewerState, available_solvers, load_any
from kinema.viewer._geometry import bone_instances, limit_segments, unit_bone_mesh
from kinema.viewer._state import urdf_hinge_limits

# Bone lengths are kept by rotations only: 1e-9 relative in float64.
LENGTH_RTOL = 1e-9
# Positions that must not move at all (an added goal whose target sits on the end joint).
SAME_POS_ATOL = 1e-12

ITERATIVE = [s for s in ("CCD", "FABRIK", "DLS") if s in available_solvers()]


def _lengths(state: ViewerState, positions: np.ndarray) -> np.ndarray:
    par = state.skeleton.parents
    has = par >= 0
    return np.linalg.norm(positions[has] - positions[par[has]], axis=-1)


def _reachable_target(state: ViewerState, joints: np.ndarray) -> np.ndarray:
    """A point the chain can reach: the end pulled 30% of the way towards the chain's start, nudged sideways."""
    p = state.positions[joints]
    return p[-1] + 0.3 * (p[0] - p[-1]) + np.array([0.0, 0.0, 0.05])


# ------------------------------------------------------------------ solvers and goals
def test_available_solvers_match_kinema() -> None:
    names = available_solvers()
    assert names, "no solver found in kinema"
    for label, func in SOLVERS:
        assert (label in names) == callable(getattr(kinema, func, None))


def test_new_goal_leaves_pose_unchanged(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    st.set_frame(5)
    before = st.positions.copy()
    for end in ("l_wrist", "r_ankle"):
        st.add_chain(end, 2)
    np.testing.assert_allclose(st.positions, before, rtol=0, atol=1e-9)
    for g in st.goals:
        assert g.status.reached and g.status.error <= g.tolerance


@pytest.mark.parametrize("solver", available_solvers())
def test_dragged_target_is_reached_by_every_solver(toy, solver: str) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip, iterations=100)
    lengths0 = _lengths(st, st.positions)
    g = st.add_chain("l_wrist", 2, solver)
    target = _reachable_target(st, g.joints)
    st.set_target(g.id, target)
    assert g.status.message == ""
    np.testing.assert_allclose(st.positions[g.end], target, rtol=0, atol=g.tolerance)
    assert g.status.reached and g.status.error <= g.tolerance and g.status.iterations >= 1
    np.testing.assert_allclose(_lengths(st, st.positions), lengths0, rtol=LENGTH_RTOL)
    # only the chain (and what hangs below it) moved
    moved = np.nonzero(np.linalg.norm(st.positions - forward_kinematics(skel, st.animated_pose()).positions,
                                      axis=-1) > 1e-12)[0]
    assert set(moved.tolist()) <= {skel.index("l_elbow"), skel.index("l_wrist")}


def test_four_chains_at_once(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    targets = {}
    for end in ("l_wrist", "r_wrist", "l_ankle", "r_ankle"):
        g = st.add_chain(end, 2)
        targets[g.id] = _reachable_target(st, g.joints)
    for gid, t in targets.items():
        st.set_target(gid, t)
    for g in st.goals:
        np.testing.assert_allclose(st.positions[g.end], targets[g.id], rtol=0, atol=g.tolerance)
        assert g.status.reached


def test_weight_blends_with_the_animation(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    st.set_frame(3)
    g = st.add_chain("r_wrist", 2)
    st.set_target(g.id, _reachable_target(st, g.joints))
    solved = st.posed.rotations.copy()
    anim = st.animated_pose().rotations
    st.update_chain(g.id, weight=0.0)
    np.testing.assert_array_equal(st.posed.rotations, anim)
    assert not g.status.reached
    st.update_chain(g.id, weight=0.4)
    np.testing.assert_allclose(st.posed.rotations[g.joints], rotation.slerp(anim[g.joints], solved[g.joints], 0.4),
                               atol=1e-12)
    others = np.setdiff1d(np.arange(skel.n_joints), g.joints)
    np.testing.assert_array_equal(st.posed.rotations[others], anim[others])
    with pytest.raises(SolverInputError, match="weight"):
        st.update_chain(g.id, weight=1.5)


def test_disabled_goal_is_ignored(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_ankle", 2)
    st.set_target(g.id, _reachable_target(st, g.joints))
    st.update_chain(g.id, enabled=False)
    np.testing.assert_array_equal(st.posed.rotations, st.animated_pose().rotations)
    assert g.status.message == "off"


def test_switch_solver_and_chain(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 2, "two-bone")
    for solver in available_solvers():
        st.update_chain(g.id, solver=solver)
        target = _reachable_target(st, g.joints)
        st.set_target(g.id, target)
        assert g.solver == solver
        np.testing.assert_allclose(st.positions[g.end], target, atol=g.tolerance)
    # switch the chain: new end and length; the target restarts on the new end joint
    st.update_chain(g.id, end="r_ankle", length=2)
    assert g.end == skel.index("r_ankle")
    assert g.joints.tolist() == [skel.index("r_hip"), skel.index("r_knee"), skel.index("r_ankle")]
    np.testing.assert_allclose(g.target, st.positions[g.end], atol=1e-9)
    with pytest.raises(SolverInputError, match="unknown solver"):
        st.update_chain(g.id, solver="magic")
    with pytest.raises(SolverInputError, match="ancestors"):
        st.update_chain(g.id, end="spine", length=3)
    assert g.end == skel.index("r_ankle")  # a rejected change leaves the goal as it was


def test_goals_are_one_rig_equal_to_the_prepared_solvers_by_hand(toy) -> None:
    """The viewer composes its goals as a kinema.Rig: the same pose as the prepared solvers run by hand."""
    skel, clip = toy
    st = ViewerState(skel, clip)
    st.set_frame(4)
    arm = st.add_chain("l_wrist", 2, "two-bone")
    leg = st.add_chain("r_ankle", 2, "CCD")
    st.set_target(arm.id, _reachable_target(st, arm.joints))
    st.set_target(leg.id, _reachable_target(st, leg.joints))
    st.update_chain(leg.id, weight=0.6)
    cur = st.animated_pose()
    j = arm.joints
    cur = kinema.TwoBone(skel, (int(j[0]), int(j[-2]), int(j[-1]))).solve(cur, arm.target, pole=arm.pole).pose
    ccd = kinema.CCD(skel, (int(leg.joints[0]), int(leg.joints[-1])), iterations=st.iterations,
                     tolerance=leg.tolerance, limits=st.chain_limits(leg) or None)
    cur = ccd.solve(cur, leg.target, pole=leg.pole, weight=0.6).pose
    np.testing.assert_array_equal(st.posed.rotations, cur.rotations)
    # Prepared once: moving a target reuses the rig; changing a goal's settings rebuilds it.
    rig, _ = st.rig()
    st.set_target(arm.id, _reachable_target(st, arm.joints) + [0.0, 0.01, 0.0])
    assert st.rig()[0] is rig
    st.update_chain(leg.id, weight=0.5)
    assert st.rig()[0] is not rig
    assert [s.name for s in st.rig()[0].steps] == [f"goal{arm.id}", f"goal{leg.id}"]


def test_chain_joints_and_candidates(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    assert st.chain_joints("l_wrist", 3).tolist() == [skel.index(n) for n in ("chest", "l_shoulder", "l_elbow",
                                                                             "l_wrist")]
    with pytest.raises(SolverInputError, match="at least one bone"):
        st.chain_joints("l_wrist", 0)
    with pytest.raises(kinema.BoneNotFoundError):
        st.chain_joints("l_hand", 2)
    cands = st.chain_candidates(2)
    assert cands[:4] == ["l_wrist", "r_wrist", "l_ankle", "r_ankle"]  # limb ends first
    assert "hips" not in cands and "spine" not in cands


def test_solver_error_keeps_the_chain_animated(toy) -> None:
    """Degenerate branch: two-bone on a one-bone chain fails; the message is kept, the pose stays animated."""
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 1, "CCD" if "CCD" in available_solvers() else None)
    st.update_chain(g.id, solver="two-bone", target=st.positions[g.end] + 0.1)
    assert "two-bone needs" in g.status.message and not g.status.reached
    np.testing.assert_array_equal(st.posed.rotations, st.animated_pose().rotations)
    assert "two-bone needs" in st.status_markdown()


def test_straight_chain_gets_a_perpendicular_pole() -> None:
    """Degenerate branch: a straight chain has no bend direction; the default pole is perpendicular to it."""
    skel = kinema.Skeleton(["a", "b", "c"], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0, 1, 0]])
    st = ViewerState(skel)
    rest = st.positions.copy()
    g = st.add_chain("c", 2)
    axis = rest[2] - rest[0]
    off = g.pole - rest[1]
    assert abs(np.dot(off, axis)) < 1e-12
    assert np.linalg.norm(off) == pytest.approx(0.5 * 2.0, rel=1e-12)  # POLE_OFFSET_FRACTION of the length


@pytest.mark.skipif(not ITERATIVE, reason="no iterative solver with limits in this kinema")
def test_limits_hold_and_are_reported() -> None:
    skel = kinema.Skeleton(["a", "b", "c"], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0, 1, 0]])
    # the middle joint may only bend 0..30 degrees about z: a target beside the root needs more
    hinge = Hinge((0.0, 0.0, 1.0), 0.0, math.radians(30.0))
    st = ViewerState(skel, limits={"b": hinge})
    g = st.add_chain("c", 2, ITERATIVE[0])
    st.set_target(g.id, [-0.6, 0.4, 0.0])
    q_rel = rotation.multiply(rotation.inverse(skel.rotations[1]), st.posed.rotations[1])
    axis, angle = rotation.as_axis_angle(q_rel)
    signed = float(angle) * float(np.sign(axis[2]) or 1.0)
    assert -1e-9 <= signed <= math.radians(30.0) + 1e-9
    assert g.status.limits_hit > 0 and not g.status.reached
    st.use_limits = False
    st.evaluate()
    assert g.status.limits_hit == 0


# ------------------------------------------------------------------ timeline
def test_timeline_frames_and_loop(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    st.set_frame(10**6)
    assert st.frame == clip.n_frames - 1
    st.set_frame(-4)
    assert st.frame == 0
    np.testing.assert_array_equal(st.animated_pose().rotations, clip.pose.rotations[0])
    st.advance(2.5 / clip.fps)  # two and a half frames
    assert st.frame == 2
    st.advance(100.0)  # a long stall never jumps more than MAX_FRAMES_PER_STEP frames
    assert st.frame == 6
    for _ in range(40):
        st.advance(1.0 / clip.fps)
    assert 0 <= st.frame < clip.n_frames  # looped
    np.testing.assert_array_equal(st.posed.rotations, clip.pose.rotations[st.frame])


def test_goal_holds_its_world_target_while_the_clip_plays(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_ankle", 2)
    # within reach on every frame: the hips travel 0.5 along z, the leg is 0.87 long
    target = np.array([st.positions[g.end][0], 0.35, 0.25])
    st.set_target(g.id, target)
    for f in range(0, clip.n_frames, 5):
        st.set_frame(f)
        np.testing.assert_allclose(st.positions[g.end], target, atol=g.tolerance)


def test_bake_equals_frame_by_frame(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("r_wrist", 2)
    st.set_target(g.id, _reachable_target(st, g.joints))
    st.update_chain(g.id, weight=0.7)
    baked = st.bake()
    assert baked.n_frames == clip.n_frames and baked.fps == clip.fps
    for f in (0, 7, clip.n_frames - 1):
        st.set_frame(f)
        np.testing.assert_allclose(baked.pose.rotations[f], st.posed.rotations, atol=1e-12)
        np.testing.assert_allclose(baked.pose.translations[f], st.posed.translations, atol=1e-12)


# ------------------------------------------------------------------ files
def test_export_bvh_round_trip(toy, tmp_path: Path) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 2)
    target = _reachable_target(st, g.joints)
    st.set_target(g.id, target)
    out = st.export(tmp_path / "posed.bvh")
    skel2, clip2 = kinema.io.load_bvh(out)
    assert clip2.n_frames == clip.n_frames
    fk = forward_kinematics(skel2, clip2.pose)
    end = skel2.index("l_wrist")
    # every frame of the exported clip has the hand on the target (BVH stores 6 decimals)
    np.testing.assert_allclose(fk.positions[:, end], np.broadcast_to(target, (clip.n_frames, 3)), atol=1e-4)
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic writer left no temporary file


def test_export_glb_and_refusals(toy, tmp_path: Path) -> None:
    pytest.importorskip("pygltflib")
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("r_ankle", 2)
    st.set_target(g.id, _reachable_target(st, g.joints))
    out = st.export(tmp_path / "posed.glb")
    asset = kinema.io.load_gltf(out)
    clip2 = next(iter(asset.clips.values()))
    fk = forward_kinematics(asset.skeleton, clip2.pose)
    np.testing.assert_allclose(fk.positions[:, asset.skeleton.index("r_ankle")],
                               np.broadcast_to(g.target, (clip2.n_frames, 3)), atol=1e-5)  # float32 in glTF
    with pytest.raises(ValueError, match="bvh, glb or gltf"):
        st.export(tmp_path / "posed.fbx")
    # the file being viewed is never overwritten
    src = tmp_path / "in.bvh"
    kinema.io.save_bvh(src, skel, clip)
    before = src.read_bytes()
    viewed = ViewerState.from_file(src)
    with pytest.raises(FileExistsError):
        viewed.export(src)
    assert src.read_bytes() == before


def test_bad_files_give_a_message_and_keep_the_content(toy, tmp_path: Path) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 2)
    bad = tmp_path / "broken.bvh"
    bad.write_text("HIERARCHY\nROOT hips\n{\n  OFFSET 0 0\n")
    for path, words in ((bad, "broken.bvh"), (tmp_path / "missing.bvh", "no such file"),
                        (tmp_path / "notes.txt", "unknown file type")):
        if path.suffix == ".txt":
            path.write_text("hello")
        msg = st.load(path)
        assert msg is not None and words in msg
        assert st.messages[-1] == msg
        assert st.skeleton is skel and st.goals == [g]  # nothing lost
    with pytest.raises(FileFormatError):
        load_any(bad)


def test_load_real_files(shared_data: Path) -> None:
    st = ViewerState.from_file(shared_data / "bvh" / "test_mocapbank.bvh")
    assert st.n_frames > 100 and st.mesh is None
    msg = st.load(shared_data / "gltf" / "RiggedFigure.gltf")
    assert msg is None and st.mesh is not None and st.source.endswith("RiggedFigure.gltf")
    assert st.goals == [] and st.frame == 0


def test_skinned_mesh_bind_transforms_reproduce_gltf_skinning(shared_data: Path) -> None:
    """viser skins by ``T_current @ inverse(T_bind)``; with T_bind = inverse(IBM) that is glTF's ``T @ IBM``."""
    asset = kinema.io.load_gltf(shared_data / "gltf" / "RiggedFigure.gltf")
    mesh = asset.mesh
    assert mesh is not None
    clip = next(iter(asset.clips.values()))
    pose = clip.pose[clip.n_frames - 1]
    fk = forward_kinematics(asset.skeleton, pose)
    r_cur = rotation.as_matrix(fk.rotations)
    r_bind = rotation.as_matrix(mesh.bind_rotations)
    w = mesh.skin_weights(asset.skeleton.n_joints)  # dense (V, J)
    v = mesh.positions
    # per joint: v' = R_cur R_bind^T (v - p_bind) + p_cur
    local = np.einsum("jba,jvb->jva", r_bind, v[None] - mesh.bind_positions[:, None])
    moved = np.einsum("jab,jvb->jva", r_cur, local) + fk.positions[:, None]
    ours = np.einsum("vj,jva->va", w, moved)
    np.testing.assert_allclose(ours, asset.mesh.skinned_positions(asset.skeleton, pose), atol=1e-5)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-5)


# ------------------------------------------------------------------ sample
def test_sample_humanoid_with_urdf_hinges() -> None:
    pytest.importorskip("kinema.samples")
    st = ViewerState.from_sample()
    names = {st.skeleton.names[j] for j in st.limits}
    assert names == {"left_knee", "right_knee", "left_elbow", "right_elbow"}
    assert st.n_frames > 10 and st.fps > 0
    assert set(st.chain_candidates(2)[:4]) == {"left_wrist", "right_wrist", "left_ankle", "right_ankle"}
    knee = st.limits[st.skeleton.index("left_knee")]
    assert isinstance(knee, Hinge) and knee.max_angle == 0.0
    # the clip itself keeps the knees inside their hinge (so the limits agree with the data)
    for j, lim in st.limits.items():
        assert np.all(lim.contains(st.clip.pose.rotations[:, j], st.skeleton.rotations[j], atol=1e-6))


def test_urdf_hinge_limits_need_urdf_meta(toy) -> None:
    skel, _ = toy
    assert urdf_hinge_limits(skel) == {}


# ------------------------------------------------------------------ geometry
def test_bone_instances_map_the_unit_bone_onto_each_bone(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    kids, pos, wxyz, scales = bone_instances(skel, st.positions, 0.02)
    xyzw = np.concatenate([wxyz[:, 1:], wxyz[:, :1]], axis=1)
    tip = pos + rotation.rotate(xyzw, scales * np.array([0.0, 0.0, 1.0]))
    np.testing.assert_allclose(tip, st.positions[kids], atol=1e-12)
    verts, faces = unit_bone_mesh()
    assert verts[:, 2].min() == 0.0 and verts[:, 2].max() == 1.0 and faces.max() < len(verts)


def _rig_for_limits() -> tuple[kinema.Skeleton, ViewerState]:
    rest = rotation.from_axis_angle([0, 1, 0], 0.7)  # a turned rest frame, so the rest rotation matters
    skel = kinema.Skeleton(["a", "b", "c"], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0, 0.5, 0]],
                           [[0, 0, 0, 1], rest, [0, 0, 0, 1]])
    return skel, ViewerState(skel)


def test_hinge_arc_geometry() -> None:
    skel, st = _rig_for_limits()
    hinge = Hinge((1.0, 0.0, 0.0), -0.4, 1.1)
    segs = limit_segments(skel, st.posed, st.positions, st.rotations, 1, hinge)
    origin = st.positions[1]
    arc = segs[:-2]
    pts = np.concatenate([arc[:, 0], arc[-1:, 1]])
    r = np.linalg.norm(pts - origin, axis=1)
    np.testing.assert_allclose(r, 0.45 * 0.5, rtol=1e-12)  # LIMIT_RADIUS_FRACTION of the child bone
    world_axis = rotation.rotate(st.rotations[1], [1.0, 0.0, 0.0])  # parent world rot * rest = joint world at rest
    np.testing.assert_allclose((pts - origin) @ world_axis, 0.0, atol=1e-12)  # the arc is in the hinge plane
    # its ends are the child direction turned by min and max about the axis
    d = np.array([0.0, 1.0, 0.0])
    for end, angle in ((pts[0], -0.4), (pts[-1], 1.1)):
        q = rotation.multiply(st.rotations[1], rotation.from_axis_angle([1.0, 0, 0], angle))
        np.testing.assert_allclose(end, origin + 0.225 * rotation.rotate(q, d), atol=1e-12)


def test_swing_cone_and_euler_box_geometry() -> None:
    skel, st = _rig_for_limits()
    cone = SwingTwist((0.0, 1.0, 0.0), (0.3, 0.6))
    segs = limit_segments(skel, st.posed, st.positions, st.rotations, 1, cone)
    origin = st.positions[1]
    rim = segs[:-4, 0]
    bone = rotation.rotate(st.rotations[1], [0.0, 1.0, 0.0])  # the child at rest, along the twist axis
    ang = np.arccos(np.clip((rim - origin) @ bone / np.linalg.norm(rim - origin, axis=1), -1, 1))
    assert ang.min() == pytest.approx(0.3, abs=1e-9) and ang.max() == pytest.approx(0.6, abs=1e-9)
    box = EulerRange("XYZ", (-0.2, -0.3, -0.1), (0.2, 0.3, 0.1))
    segs = limit_segments(skel, st.posed, st.positions, st.rotations, 1, box)
    assert segs.shape[1:] == (2, 3) and len(segs) == 12 * 11
    # a joint without a child has nothing to outline
    assert limit_segments(skel, st.posed, st.positions, st.rotations, 2, cone).shape == (0, 2, 3)


# ------------------------------------------------------------------ packaging
def test_core_never_imports_the_viewer() -> None:
    code = ("import sys, kinema, kinema.io, kinema.limits; "
            "bad = [m for m in ('viser', 'kinema.viewer') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stdout + r.stderr


def test_view_subcommand_defaults_to_loopback() -> None:
    import argparse

    from kinema.viewer import add_view_parser

    p = argparse.ArgumentParser(prog="kinema")
    add_view_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["view"])
    assert (args.file, args.host, args.port, args.root, args.out) == (None, "127.0.0.1", 8080, None, None)
    args = p.parse_args(["view", "walk.bvh", "--port", "9000", "--root", "clips", "--out", "done"])
    assert (args.file, args.port, args.root, args.out, args.func.__name__) == ("walk.bvh", 9000, "clips", "done",
                                                                               "run_view")


def test_warm_up_changes_nothing(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    g = st.add_chain("l_wrist", 2)
    before = (st.posed.rotations.copy(), g.target.copy(), st.solve_count)
    assert st.warm_up() == available_solvers()
    np.testing.assert_array_equal(st.posed.rotations, before[0])
    np.testing.assert_array_equal(g.target, before[1])
    assert st.solve_count == before[2] and st.goals == [g]
    # degenerate branch: a rig with no two-bone chain has nothing to warm up
    assert ViewerState(kinema.Skeleton(["a", "b"], [-1, 0], [[0, 0, 0], [0, 1, 0]])).warm_up() == []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kinema(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kinema.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_kinema_view_serves_the_sample_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    """``kinema view --port P``: prints a loopback URL and its two folders, serves the page, stops on Ctrl-C."""
    import signal
    import time
    import urllib.request

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kinema.cli", "view", "--port", str(port), "--root", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 240
        html = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    html = r.read().decode("utf-8", "replace")
                break
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        assert "<html" in html.lower()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out and "0.0.0.0" not in out
    assert f"files under {os.path.realpath(tmp_path)}" in out and f"writes into {os.path.realpath(tmp_path)}" in out
    assert "warning" not in err  # loopback: nothing to warn about


def test_kinema_view_on_a_bad_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """No fallback to the sample: a missing, broken or special file, or a bad --root/--out, ends at once."""
    broken = tmp_path / "broken.bvh"
    broken.write_text("HIERARCHY\nROOT hips\n{\n  OFFSET 0 0\n")
    fifo = tmp_path / "pipe.bvh"
    os.mkfifo(fifo)
    (tmp_path / "folder.bvh").mkdir()
    port = str(_free_port())
    cases = [
        (["view", "missing.bvh"], "missing.bvh"),
        (["view", str(broken)], "broken.bvh:"),  # the loader's file and line
        (["view", str(fifo)], "not a regular file"),  # refused before it is opened (it would block)
        (["view", str(tmp_path / "folder.bvh")], "not a regular file"),
        (["view", "--root", str(tmp_path / "nowhere")], "is not a folder"),
        (["view", "--out", str(broken)], "is not a folder"),
    ]
    for args, words in cases:
        r = _kinema(*args, "--port", port, cwd=tmp_path, timeout=60)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("kinema: error: ") and words in lines[0], (args, r.stderr)
        assert "Traceback" not in r.stderr and "http://" not in r.stdout
    # python -m kinema.viewer is the same command
    r = subprocess.run([sys.executable, "-m", "kinema.viewer", "missing.bvh", "--port", port], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 1 and r.stderr.splitlines() == ["kinema: error: no such file: missing.bvh"]


def test_serve_raises_for_a_bad_file_before_listening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import viser

    from kinema.viewer import serve

    started = []
    monkeypatch.setattr(viser, "ViserServer", lambda *a, **k: started.append((a, k)))
    with pytest.raises(FileNotFoundError, match="missing.bvh"):
        serve(tmp_path / "missing.bvh", port=0, block=False, root=tmp_path, export_dir=tmp_path, verbose=False)
    assert started == []


class _NoServer(Exception):
    """Raised by a stand-in for viser.ViserServer: the test stops before anything listens."""


def test_host_other_than_loopback_warns(toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import viser

    from kinema.viewer import FileAccess, serve
    from kinema.viewer._serve import host_warning, is_loopback

    for host in ("127.0.0.1", "127.4.5.6", "localhost", "LocalHost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "192.168.1.20", "10.0.0.1", "example.org", "127.0.0.1.example.org"):
        assert not is_loopback(host), host
    files = FileAccess(tmp_path, tmp_path)
    assert host_warning("127.0.0.1", files) is None
    text = host_warning("0.0.0.0", files)
    assert text is not None and "anyone" in text and "network" in text and str(files.root) in text

    # serve() prints it before it starts the server (the stand-in stops there: nothing listens in tests)
    hosts = []

    def fake_server(*, host: str, port: int, verbose: bool) -> None:
        hosts.append(host)
        raise _NoServer

    monkeypatch.setattr(viser, "ViserServer", fake_server)
    with pytest.raises(_NoServer):
        serve(state=ViewerState(*toy), host="0.0.0.0", port=8123, block=False, root=tmp_path,
              export_dir=tmp_path, verbose=False)
    assert hosts == ["0.0.0.0"]
    err = capsys.readouterr().err
    assert "warning: listening on 0.0.0.0" in err and "anyone" in err
    with pytest.raises(_NoServer):
        serve(state=ViewerState(*toy), host="127.0.0.1", port=8123, block=False, root=tmp_path,
              export_dir=tmp_path, verbose=False)
    assert "warning" not in capsys.readouterr().err


def test_server_plays_the_clip_under_the_goals_and_exports(toy, tmp_path: Path) -> None:
    """The running viewer (no browser): playback advances frames with the goal held, the export button writes."""
    import time

    from kinema.viewer import serve

    skel, clip = toy
    v = serve(state=ViewerState(skel, clip), port=0, block=False, root=tmp_path, export_dir=tmp_path, verbose=False)
    try:
        assert v.url.startswith("http://127.0.0.1:")
        st, app = v.state, v.app
        g = app.add_chain("l_ankle", 2)
        target = np.array([st.positions[g.end][0], 0.35, 0.25])
        st.set_target(g.id, target)
        app._play.value = True  # runs the checkbox's callback, as a click does
        assert st.playing
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < 5 and time.monotonic() < deadline:
            with st.lock:
                seen.add(st.frame)
                np.testing.assert_allclose(st.positions[g.end], target, atol=g.tolerance)
            time.sleep(0.02)
        assert len(seen) >= 5 and app.refresh_count > 5
        st.playing = False
        app._export_name.value = "out.bvh"
        app._on_export(None)
        skel2, clip2 = kinema.io.load_bvh(tmp_path / "out.bvh")
        assert clip2.n_frames == clip.n_frames
    finally:
        v.close()


# ------------------------------------------------------------------ file confinement
@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """``base/root`` with loadable files, decoys and symlinks; ``base/outside`` beside it; ``base/out``."""
    base = tmp_path
    root, outside, out = base / "root", base / "outside", base / "out"
    for d in (root / "sub" / "deep", root / ".hidden", outside / "inner", out):
        d.mkdir(parents=True)
    for rel in ("a.bvh", "sub/b.gltf", "sub/deep/c.GLB", "notes.txt", ".hidden/x.bvh", ".dot.bvh"):
        (root / rel).write_text("x")
    (root / "dir.bvh").mkdir()  # a folder with a loadable name is not a file
    os.mkfifo(root / "pipe.bvh")
    (outside / "secret.bvh").write_text("secret")
    (outside / "inner" / "deeper.bvh").write_text("secret")
    os.symlink(root / "a.bvh", root / "link_in.bvh")  # a symlink that stays inside: listed
    os.symlink(outside / "secret.bvh", root / "link_out.bvh")  # one that leaves the root: not listed
    os.symlink(outside, root / "linkdir")  # a symlinked folder: never walked
    os.symlink(root / "gone.bvh", root / "dangling.bvh")
    return {"base": base, "root": root, "outside": outside, "out": out}


def test_open_lists_only_loadable_files_under_the_root(folders: dict[str, Path]) -> None:
    from kinema.viewer import FileAccess

    files = FileAccess(folders["root"], folders["out"])
    assert files.listing() == ["a.bvh", "link_in.bvh", "sub/b.gltf", "sub/deep/c.GLB"]
    # bounded walk: a file count and an entry count cap it
    assert files.listing(max_files=2) == ["a.bvh", "link_in.bvh"]
    assert files.listing(max_entries=1) == []  # the first entry in name order is ".dot.bvh", hidden
    assert files.listing(max_entries=3) == ["a.bvh"]  # ".dot.bvh", ".hidden", "a.bvh"


def test_open_path_refuses_everything_outside_the_root(folders: dict[str, Path]) -> None:
    from kinema.viewer import FileAccess, ViewerPathError

    root, outside = folders["root"], folders["outside"]
    files = FileAccess(root, folders["out"])
    for rel in files.listing():
        p = files.open_path(rel)
        assert p.is_file() and os.path.commonpath([files.root, p]) == str(files.root)
    assert files.open_path("link_in.bvh") == files.root / "a.bvh"  # resolved
    assert files.relative(root / "sub" / "b.gltf") == "sub/b.gltf"
    assert files.relative(root / "link_out.bvh") is None and files.relative(outside / "secret.bvh") is None
    refused = [
        "../outside/secret.bvh", str(outside / "secret.bvh"), "/etc/passwd", "link_out.bvh", "linkdir/secret.bvh",
        "linkdir/inner/deeper.bvh", "sub/../a.bvh", "./a.bvh", "sub//b.gltf", "pipe.bvh", "dir.bvh", "notes.txt",
        "missing.bvh", "dangling.bvh", "", "a.bvh\x00.txt", "..\\outside\\secret.bvh",
    ]
    for rel in refused:
        with pytest.raises(ViewerPathError) as info:
            files.open_path(rel)
        msg = str(info.value)
        # the message names what was asked, never where the root or the outside folder are
        assert str(folders["base"]) not in msg.replace(repr(rel), ""), (rel, msg)
        assert "secret" not in msg.replace(repr(rel), ""), (rel, msg)


def test_export_names_are_confined_to_the_output_folder(folders: dict[str, Path]) -> None:
    from kinema.viewer import ExportExistsError, FileAccess, ViewerPathError

    out, outside = folders["out"], folders["outside"]
    (out / "taken.bvh").write_text("original")
    os.symlink(outside / "secret.bvh", out / "link.bvh")
    (out / "folder.bvh").mkdir()
    before = tree(folders["base"])
    files = FileAccess(folders["root"], out)
    assert files.export_target("new.bvh") == files.out_dir / "new.bvh"
    assert files.export_target("  spaced name.GLB ") == files.out_dir / "spaced name.GLB"
    assert files.export_target("take..2.bvh") == files.out_dir / "take..2.bvh"  # ".." inside a plain name
    bad = ["../escape.bvh", "../../escape.bvh", str(outside / "abs.bvh"), "/tmp/abs.bvh", "sub/x.bvh", "a\\b.bvh",
           "..", ".hidden.bvh", "x.txt", "x", "", "   ", "a\nb.bvh", "a" * 300 + ".bvh", "C:\\x.bvh",
           "a\x85b.bvh", "a\u2028b.bvh", "a\u2029b.bvh", "x\u202egpj.bvh", "a\x7fb.bvh"]  # C1, separators, RLO
    for name in bad:
        with pytest.raises(ViewerPathError) as info:
            files.export_target(name, overwrite=True)  # no confirmation makes these acceptable
        assert not isinstance(info.value, ExportExistsError), name
    # a symlink or a folder at the target is refused even with the confirmation
    for name in ("link.bvh", "folder.bvh"):
        with pytest.raises(ViewerPathError):
            files.export_target(name, overwrite=True)
    # an existing file needs the confirmation
    with pytest.raises(ExportExistsError, match="taken.bvh already exists"):
        files.export_target("taken.bvh")
    assert files.export_target("taken.bvh", overwrite=True) == files.out_dir / "taken.bvh"
    assert tree(folders["base"]) == before  # checking writes nothing anywhere


def test_page_messages_hide_paths_outside_the_folders(folders: dict[str, Path]) -> None:
    from kinema.viewer import FileAccess
    from kinema.viewer._files import HIDDEN_PATH

    files = FileAccess(folders["root"], folders["out"])
    root, out = str(files.root), str(files.out_dir)
    assert files.public(f"could not open {root}/sub/b.gltf: bad") == "could not open sub/b.gltf: bad"
    assert files.public(f"PermissionError: [Errno 13] Permission denied: '{out}/x.bvh'") == \
        "PermissionError: [Errno 13] Permission denied: 'x.bvh'"
    assert files.public("buffer uri resolves to /etc/passwd (outside)") == \
        f"buffer uri resolves to {HIDDEN_PATH} (outside)"
    assert files.public(f"'{folders['outside']}/secret.bvh' exists") == f"'{HIDDEN_PATH}' exists"
    assert files.public("speed 3 m/s, 2/3 done, rad/s") == "speed 3 m/s, 2/3 done, rad/s"
    # a file name with spaces is hidden whole (its tail after the first space showed)
    assert files.public(f"could not open {folders['outside']}/my secret take.bvh: no such file") == \
        f"could not open {HIDDEN_PATH}: no such file"
    assert files.public(f"{folders['outside']}/a b.bvh:12: bad OFFSET") == f"{HIDDEN_PATH}:12: bad OFFSET"
    assert "secret" not in files.public(f"reading {folders['outside']}/my secret.bvh")


# ------------------------------------------------------------------ limb chains
def test_humanoid_limb_ends_of_the_sample_the_mocap_and_name_variants(toy, shared_data: Path) -> None:
    from kinema.viewer import humanoid_limb_ends

    pytest.importorskip("kinema.samples")
    from kinema import samples

    assert humanoid_limb_ends(samples.humanoid()) == ["right_wrist", "left_wrist", "right_ankle", "left_ankle"]
    mocap, _ = kinema.io.load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")
    assert humanoid_limb_ends(mocap) == ["RightWrist", "LeftWrist", "RightAnkle", "LeftAnkle"]
    assert humanoid_limb_ends(toy[0]) == ["r_wrist", "l_wrist", "r_ankle", "l_ankle"]
    # RiggedFigure's arm_joint_L_3 / leg_joint_L_5 name no wrist or ankle: not recognised, no chains
    figure = kinema.io.load_gltf(shared_data / "gltf" / "RiggedFigure.gltf").skeleton
    assert humanoid_limb_ends(figure) == []

    def rig(ends: dict[str, list[str]]) -> kinema.Skeleton:
        names, parents = ["Hips"], [-1]
        for chain in ends.values():
            for k, n in enumerate(chain):
                names.append(n)
                parents.append(0 if k == 0 else len(names) - 2)
        return kinema.Skeleton(names, parents, np.tile([0.0, 0.1, 0.0], (len(names), 1)))

    mixamo = rig({s + a: [f"mixamorig:{s}{a}", f"mixamorig:{s}{b}", f"mixamorig:{s}{c}", f"mixamorig:{s}{c}Index1"]
                  for s in ("Left", "Right") for a, b, c in (("Arm", "ForeArm", "Hand"), ("UpLeg", "Leg", "Foot"))})
    assert humanoid_limb_ends(mixamo) == ["mixamorig:RightHand", "mixamorig:LeftHand", "mixamorig:RightFoot",
                                          "mixamorig:LeftFoot"]
    # both a wrist and a hand below it: the wrist ends the chain
    both = rig({s: [f"{s}Shoulder", f"{s}Elbow", f"{s}Wrist", f"{s}Hand"] for s in ("Left", "Right")}
               | {f"{s}leg": [f"{s}Hip", f"{s}Knee", f"{s}Ankle"] for s in ("Left", "Right")})
    assert humanoid_limb_ends(both) == ["RightWrist", "LeftWrist", "RightAnkle", "LeftAnkle"]
    # one arm missing, or a wrist without two bones above it: not a humanoid this recognises
    assert humanoid_limb_ends(rig({"l": ["LeftElbow", "LeftWrist"], "r": ["RightShoulder", "RightElbow",
                                                                           "RightWrist"]})) == []
    one_arm = rig({s: [f"{s}Hip", f"{s}Knee", f"{s}Ankle"] for s in ("Left", "Right")}
                  | {"r": ["RightShoulder", "RightElbow", "RightWrist"]})
    assert humanoid_limb_ends(one_arm) == []


def test_add_limb_chains_poses_nothing_until_dragged(toy) -> None:
    skel, clip = toy
    st = ViewerState(skel, clip)
    st.set_frame(3)
    before = st.positions.copy()
    goals = st.add_limb_chains()
    assert [skel.names[g.end] for g in goals] == ["r_wrist", "l_wrist", "r_ankle", "l_ankle"]
    assert [skel.names[int(g.joints[0])] for g in goals] == ["r_shoulder", "l_shoulder", "r_hip", "l_hip"]
    assert all(g.length == 2 and g.solver == st.default_solver(2) for g in goals) and st.goals == goals
    np.testing.assert_allclose(st.positions, before, rtol=0, atol=1e-9)
    assert all(g.status.reached for g in goals)
    unknown = ViewerState(kinema.Skeleton(["a", "b", "c"], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0, 1, 0]]))
    assert unknown.add_limb_chains() == [] and unknown.goals == []


# ------------------------------------------------------------------ the running app (no browser)
def test_app_opens_with_the_limb_chains_and_frames_each_opened_rig(folders: dict[str, Path], shared_data: Path
                                                                  ) -> None:
    """Open from the file list: the cm mocap and the metre glTF each get a camera, grid and clipping planes
    scaled to their size; refused paths change nothing."""
    import shutil

    from kinema.viewer import ViewerPathError, serve

    root = folders["root"]
    shutil.copy(shared_data / "bvh" / "test_mocapbank.bvh", root / "sub" / "mocap.bvh")
    shutil.copy(shared_data / "gltf" / "RiggedFigure.gltf", root / "figure.gltf")
    v = serve(port=0, block=False, root=root, export_dir=folders["out"], verbose=False)
    try:
        st, app = v.state, v.app
        assert [st.skeleton.names[g.end] for g in st.goals] == ["right_wrist", "left_wrist", "right_ankle",
                                                                 "left_ankle"]
        assert set(app._chains) == {g.id for g in st.goals}  # each has its gizmos
        assert list(app._file.options) == ["a.bvh", "figure.gltf", "link_in.bvh", "sub/b.gltf", "sub/deep/c.GLB",
                                           "sub/mocap.bvh"]
        sizes = {}
        for rel in ("sub/mocap.bvh", "figure.gltf"):
            assert app.open_file(rel) is None
            assert st.source == str(app.files.root / rel)
            p = st.positions
            size = float(np.max(p.max(axis=0) - p.min(axis=0)))
            sizes[rel] = size
            position, look_at, near, far = app.camera_framing()
            np.testing.assert_allclose(app.server.initial_camera.position, position, rtol=1e-12)
            np.testing.assert_allclose(app.server.initial_camera.look_at, look_at, rtol=1e-12)
            np.testing.assert_allclose(look_at, (p.min(axis=0) + p.max(axis=0)) / 2, rtol=1e-12)
            np.testing.assert_allclose(np.linalg.norm(position - look_at), size * np.linalg.norm([0.7, 0.3, 1.25]),
                                       rtol=1e-12)
            assert app.server.initial_camera.near == pytest.approx(1e-3 * size)
            assert app.server.initial_camera.far == pytest.approx(1e3 * size)
            # every joint is in front of the camera, inside its clipping planes
            depth = (p - position) @ ((look_at - position) / np.linalg.norm(look_at - position))
            assert depth.min() > near and depth.max() < far
            assert app._file.value == rel
        # the mocap is in centimetres, the glTF in metres: the framing followed
        assert sizes["sub/mocap.bvh"] > 50 * sizes["figure.gltf"]
        assert st.goals == []  # RiggedFigure's names are not recognised: no chains
        assert app.open_file("sub/mocap.bvh") is None
        assert [st.skeleton.names[g.end] for g in st.goals] == ["RightWrist", "LeftWrist", "RightAnkle", "LeftAnkle"]
        assert all(g.status.reached for g in st.goals)
        skel = st.skeleton
        for rel in ("link_out.bvh", "../outside/secret.bvh", str(folders["outside"] / "secret.bvh"), "pipe.bvh"):
            with pytest.raises(ViewerPathError):
                app.open_file(rel)
        assert st.skeleton is skel
        # a broken file under the root: the page's message names it relative to the root only
        (root / "broken.bvh").write_text("HIERARCHY\nROOT hips\n{\n  OFFSET 0 0\n")
        msg = app.open_file("broken.bvh")
        assert msg is not None and msg.startswith("could not open broken.bvh") and str(folders["base"]) not in msg
        assert str(folders["base"]) not in app._message.content and "broken.bvh" in app._message.content
        assert st.skeleton is skel
        # the list is walked again on request (and after each export): a new file shows, the choice stays
        assert "broken.bvh" not in app._file.options  # walked at start and after each successful open or export
        (root / "sub" / "new.glb").write_text("x")
        app._refresh_file_list()
        assert {"broken.bvh", "sub/new.glb"} <= set(app._file.options) and app._file.value == "sub/mocap.bvh"
    finally:
        v.close()


def test_app_export_is_confined_and_asks_before_overwriting(toy, folders: dict[str, Path]) -> None:
    from kinema.viewer import ViewerPathError, serve

    skel, clip = toy
    out = folders["out"]
    (out / "taken.bvh").write_text("original")
    v = serve(state=ViewerState(skel, clip), port=0, block=False, root=folders["root"], export_dir=out,
              verbose=False)
    try:
        app = v.app
        before = tree(folders["base"])
        for name in ("../escape.bvh", str(folders["outside"] / "abs.bvh"), "sub/x.bvh"):
            app._export_name.value = name
            with pytest.raises(ViewerPathError):
                app._on_export(None)
        assert tree(folders["base"]) == before  # nothing written anywhere
        # an existing name: nothing written until Overwrite is pressed
        app._export_name.value = "taken.bvh"
        app._on_export(None)
        assert (out / "taken.bvh").read_text() == "original"
        assert app._overwrite.visible and app._overwrite.label == "Overwrite taken.bvh"
        assert "already exists" in app._message.content
        # changing the name withdraws the offer (the callback runs as a page edit would)
        app._export_name.value = "other.bvh"
        assert not app._overwrite.visible
        with pytest.raises(ViewerPathError, match="changed"):
            app._on_overwrite(None)
        assert (out / "taken.bvh").read_text() == "original" and not (out / "other.bvh").exists()
        app._export_name.value = "taken.bvh"
        app._on_export(None)
        app._on_overwrite(None)
        skel2, clip2 = kinema.io.load_bvh(out / "taken.bvh")
        assert clip2.n_frames == clip.n_frames and not app._overwrite.visible
        assert "exported **taken.bvh**" in app._message.content
        assert sorted(p.name for p in out.iterdir()) == ["taken.bvh"]
        assert not list(out.glob(".*.tmp"))
    finally:
        v.close()


def test_names_from_files_cannot_format_the_page() -> None:
    """Joint and file names reach Markdown panels escaped: no links, images, HTML or broken tables."""
    from kinema.viewer._state import markdown_escape

    evil = "arm|![x](http://example.invalid/i.png)<b>_*"
    assert markdown_escape(evil) == r"arm\|\!\[x\]\(http://example.invalid/i.png\)\<b\>\_\*"
    assert markdown_escape("a\x1b[2Jb\nc") == r"a \[2Jb c"
    skel = kinema.Skeleton(["root", "mid", evil], [-1, 0, 1], [[0, 0, 0], [0, 1, 0], [0.3, 1, 0]])
    st = ViewerState(skel)
    st.add_chain(evil, 2)
    table = st.status_markdown().splitlines()[2]
    assert table.count("|") - table.count("\\|") == 7  # the row's own 7 cell bars, the name's bar escaped
    assert "![x](" not in table and "<b>" not in table
