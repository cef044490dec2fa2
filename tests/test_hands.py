"""kinema.hands on the sample humanoid with hands: palm alignment, finger curl, the cylinder grip, errors."""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import hands
from kinema import rotation as rot
from kinema.samples import FINGER_NAMES, HAND_PROPORTIONS, humanoid

SKELETON = humanoid(hands=True)
RIGHT = hands.Hand.from_skeleton(SKELETON, "right")
LEFT = hands.Hand.from_skeleton(SKELETON, "left")


def _random_rotations(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rot.normalize(rng.normal(size=shape + (4,)))


def _arm_pose(rng: np.random.Generator) -> kinema.Pose:
    """The rest pose with the chest, shoulders and elbows turned at random (the wrists' parents move)."""
    pose = SKELETON.rest_pose()
    for name in ("chest", "right_shoulder", "right_elbow", "left_shoulder", "left_elbow"):
        pose.rotations[SKELETON.index(name)] = _random_rotations(rng, ())
    return pose


def _bone_gaps(positions: np.ndarray, finger: hands.Finger, point: np.ndarray, axis: np.ndarray,
               radius: float) -> np.ndarray:
    """Each bone's distance to the cylinder axis minus the radius, from FK positions (an independent check)."""
    chain = [*finger.joints, finger.tip]
    pts = positions[chain] - point
    perp = pts - np.outer(pts @ axis, axis)
    out = []
    for a, b in zip(perp[:-1], perp[1:], strict=True):
        ts = np.linspace(0.0, 1.0, 2001)[:, None]
        out.append(np.linalg.norm(a + ts * (b - a), axis=1).min() - radius)
    return np.array(out)


def test_humanoid_default_is_unchanged_and_hands_extend_it():
    base = humanoid()
    full = SKELETON
    assert base.n_joints == 15 and "hands" not in base.meta
    assert full.n_joints == 15 + 2 * 5 * 4
    assert full.names[:15] == base.names
    np.testing.assert_array_equal(full.translations[:15], base.translations)
    np.testing.assert_array_equal(full.parents[:15], base.parents)
    for side in ("left", "right"):
        for finger in FINGER_NAMES:
            names = [f"{side}_{finger}{k}" for k in (1, 2, 3)] + [f"{side}_{finger}_tip"]
            idx = full.indices(names)
            assert full.names[full.parents[idx[0]]] == f"{side}_wrist"
            lengths = full.bone_lengths()[idx[1:]]
            np.testing.assert_allclose(lengths, HAND_PROPORTIONS[finger]["lengths"], rtol=0, atol=1e-12)


def test_palm_alignment_is_exact_and_keeps_the_wrist_in_place():
    rng = np.random.default_rng(3)
    for hand in (RIGHT, LEFT):
        for _ in range(5):
            pose = _arm_pose(rng)
            target = rot.as_matrix(_random_rotations(rng, ()))
            aligned = hands.align_palm(pose, hand, target)
            before = kinema.forward_kinematics(SKELETON, pose)
            after = kinema.forward_kinematics(SKELETON, aligned)
            palm_world = rot.as_matrix(after.rotations[hand.wrist]) @ hand.palm_basis
            np.testing.assert_allclose(palm_world, target, rtol=0, atol=1e-9)
            np.testing.assert_allclose(after.positions[hand.wrist], before.positions[hand.wrist], rtol=0, atol=1e-12)
            others = np.arange(SKELETON.n_joints) != hand.wrist
            np.testing.assert_array_equal(aligned.rotations[others], pose.rotations[others])


def test_palm_alignment_batched_and_via_palm_rotation():
    rng = np.random.default_rng(4)
    poses = [_arm_pose(rng) for _ in range(4)]
    batch = kinema.Pose(np.stack([p.translations for p in poses]), np.stack([p.rotations for p in poses]))
    along = rng.normal(size=(4, 3))
    normal = rng.normal(size=(4, 3))
    target = hands.palm_basis(along, normal)
    np.testing.assert_allclose(np.swapaxes(target, -1, -2) @ target, np.broadcast_to(np.eye(3), (4, 3, 3)),
                               atol=1e-12)
    np.testing.assert_allclose(target[..., 0], along / np.linalg.norm(along, axis=-1, keepdims=True), atol=1e-12)
    aligned = hands.align_palm(batch, RIGHT, target)
    fk = kinema.forward_kinematics(SKELETON, aligned)
    np.testing.assert_allclose(rot.as_matrix(fk.rotations[:, RIGHT.wrist]) @ RIGHT.palm_basis, target, atol=1e-9)
    # The same world rotation handed to two-bone IK as end_rotation.
    q = hands.palm_rotation(RIGHT, target[0])
    res = kinema.solve_two_bone(SKELETON, poses[0], ("right_shoulder", "right_elbow", "right_wrist"),
                                [0.2, 0.1, 0.2], end_rotation=q)
    wrist_world = kinema.forward_kinematics(SKELETON, res.pose).rotations[RIGHT.wrist]
    np.testing.assert_allclose(rot.as_matrix(wrist_world) @ RIGHT.palm_basis, target[0], atol=1e-9)


def test_curl_zero_is_rest_and_one_reaches_every_limit():
    rng = np.random.default_rng(5)
    pose = _arm_pose(rng)
    for hand in (RIGHT, LEFT):
        rest = hands.curl(pose, hand, 0.0)
        full = hands.curl(pose, hand, 1.0)
        for finger in hand.fingers:
            j = list(finger.joints)
            np.testing.assert_allclose(rest.rotations[j], SKELETON.rotations[j], rtol=0, atol=1e-15)
            for k, lim in zip(finger.joints, finger.limits, strict=True):
                rel = rot.multiply(rot.inverse(SKELETON.rotations[k]), full.rotations[k])
                _, twist = rot.swing_twist(rel, lim.axis)
                axis, angle = rot.as_axis_angle(twist)
                signed = float(angle) * float(np.sign(axis @ np.asarray(lim.axis)))
                assert abs(signed - lim.max_angle) <= 1e-12
                assert float(lim.violation(full.rotations[k], SKELETON.rotations[k])) <= 1e-12


def test_curl_shares_the_range_by_weight_and_stays_in_limits():
    finger = RIGHT.finger("index")
    amounts = np.linspace(0.0, 1.0, 41)
    angles = hands.finger_angles(finger, amounts)
    np.testing.assert_allclose(angles.sum(axis=1), amounts * finger.max_angles.sum(), rtol=0, atol=1e-12)
    assert np.all(np.diff(angles, axis=0) >= -1e-15)  # every joint closes monotonically
    assert np.all(angles >= 0.0) and np.all(angles <= finger.max_angles + 1e-15)
    # Below every joint's limit the angles are proportional to the weights.
    small = hands.finger_angles(finger, 0.2)
    np.testing.assert_allclose(small / finger.weights, np.full(3, small[0] / finger.weights[0]), rtol=1e-12)
    # Per-finger amounts and spread: the knuckle turns by spread * spread_angle about the spread axis.
    pose = hands.curl(SKELETON.rest_pose(), RIGHT, np.zeros(5), spread=1.0)
    for f in RIGHT.fingers:
        rel = rot.multiply(rot.inverse(SKELETON.rotations[f.joints[0]]), pose.rotations[f.joints[0]])
        expected = rot.from_axis_angle(f.spread_axis, f.spread_angle)
        np.testing.assert_allclose(rot.canonical(rel), rot.canonical(expected), atol=1e-12)
    batched = hands.curl(SKELETON.rest_pose(), RIGHT, np.full((3, 5), 0.5))
    assert batched.rotations.shape == (3, SKELETON.n_joints, 4)


def _cylinder_at_palm(pose: kinema.Pose, hand: hands.Hand, radius: float, axis_local: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """A cylinder lying against the palm's centre, axis given in the wrist frame: ``(point, axis)`` world."""
    fk = kinema.forward_kinematics(SKELETON, pose)
    w_rot = fk.rotations[hand.wrist]
    normal_world = rot.rotate(w_rot, hand.palm_basis[:, 1])
    palm_world = fk.positions[hand.wrist] + rot.rotate(w_rot, hand.palm_center)
    return palm_world + normal_world * radius, rot.rotate(w_rot, axis_local)


@pytest.mark.parametrize("side", ["right", "left"])
def test_grip_touches_the_cylinder_within_limits(side):
    hand = RIGHT if side == "right" else LEFT
    rng = np.random.default_rng(6)
    pose = _arm_pose(rng)
    radius = 0.022
    point, axis = _cylinder_at_palm(pose, hand, radius, hand.palm_basis[:, 2])
    res = hands.grip(pose, hand, point, axis, radius)
    positions = kinema.forward_kinematics(SKELETON, res.pose).positions
    assert res.touching.all()
    for i, finger in enumerate(hand.fingers):
        gaps = _bone_gaps(positions, finger, point, axis, radius)
        assert abs(gaps.min()) <= 2e-3, (finger.name, gaps)
        assert gaps.min() >= -2e-3  # no bone sinks into the handle
        for k, lim in zip(finger.joints, finger.limits, strict=True):
            assert float(lim.violation(res.pose.rotations[k], SKELETON.rotations[k])) <= 1e-12
        assert np.all(res.angles[i] > 0.0)  # every finger closed some way
    # Only the fingers moved.
    fingers = {j for f in hand.fingers for j in f.joints}
    others = [j for j in range(SKELETON.n_joints) if j not in fingers]
    np.testing.assert_array_equal(res.pose.rotations[others], pose.rotations[others])


def test_grip_out_of_reach_closes_fully_and_says_so():
    pose = SKELETON.rest_pose()
    far = kinema.forward_kinematics(SKELETON, pose).positions[RIGHT.wrist] + np.array([0.0, 0.0, 1.0])
    res = hands.grip(pose, RIGHT, far, [1.0, 0.0, 0.0], 0.02)
    assert not res.touching.any()
    np.testing.assert_allclose(res.angles, np.stack([f.max_angles for f in RIGHT.fingers]), rtol=0, atol=0)
    assert np.all(res.gap > 0.5)


def test_errors():
    pose = SKELETON.rest_pose()
    with pytest.raises(kinema.SkeletonError, match="no 'right' hand"):
        hands.Hand.from_skeleton(humanoid(), "right")
    meta = dict(SKELETON.meta)
    meta["hands"] = {"right": dict(SKELETON.meta["hands"]["right"], wrist="right_wirst")}
    renamed = kinema.Skeleton(SKELETON.names, SKELETON.parents, SKELETON.translations, meta=meta)
    with pytest.raises(kinema.BoneNotFoundError, match="right_wrist"):
        hands.Hand.from_skeleton(renamed, "right")
    def with_index(**change: object) -> kinema.Skeleton:
        entry = dict(SKELETON.meta["hands"]["right"])
        fingers = [dict(f) for f in entry["fingers"]]
        fingers[1].update(change)
        meta = dict(SKELETON.meta, hands={"right": dict(entry, fingers=tuple(fingers))})
        return kinema.Skeleton(SKELETON.names, SKELETON.parents, SKELETON.translations, meta=meta)

    with pytest.raises(kinema.SkeletonError, match="must hold 0"):
        hands.Hand.from_skeleton(with_index(flexion_deg=((10, 90), (0, 90), (0, 90))), "right")
    with pytest.raises(kinema.ShapeError, match="flexion_deg"):
        hands.Hand.from_skeleton(with_index(flexion_deg=((0, 90), (0, 90))), "right")
    with pytest.raises(kinema.SolverInputError, match="spread_axis"):
        hands.Hand.from_skeleton(with_index(spread_axis=(0.0, 0.0, 0.0)), "right")
    with pytest.raises(kinema.SolverInputError, match="weights must be positive"):
        hands.Hand.from_skeleton(with_index(weights=(1.0, 0.0, 1.0)), "right")
    with pytest.raises(kinema.SkeletonError, match="parent-to-child"):
        hands.Hand.from_skeleton(with_index(joints=("right_index1", "right_middle2", "right_index3")), "right")
    with pytest.raises(kinema.BoneNotFoundError, match="right_index1"):
        hands.Hand.from_skeleton(with_index(joints=("right_indx1", "right_index2", "right_index3")), "right")
    with pytest.raises(kinema.SolverInputError, match="no finger 'toe'"):
        RIGHT.finger("toe")
    with pytest.raises(kinema.SolverInputError, match=r"curl amount must be in \[0, 1\]"):
        hands.curl(pose, RIGHT, 1.5)
    with pytest.raises(kinema.ShapeError, match="curl amount"):
        hands.curl(pose, RIGHT, np.zeros(4))
    with pytest.raises(kinema.SolverInputError, match="NaN"):
        hands.curl(pose, RIGHT, np.nan)
    with pytest.raises(kinema.SolverInputError, match="rotation matrix"):
        hands.align_palm(pose, RIGHT, 2.0 * np.eye(3))
    with pytest.raises(kinema.ShapeError, match="target_basis_world"):
        hands.align_palm(pose, RIGHT, np.eye(4))
    with pytest.raises(kinema.SolverInputError, match="parallel"):
        hands.palm_basis([1.0, 0.0, 0.0], [2.0, 0.0, 0.0])
    with pytest.raises(kinema.SolverInputError, match="radius"):
        hands.grip(pose, RIGHT, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 0.0)
    with pytest.raises(kinema.SolverInputError, match="zero vector"):
        hands.grip(pose, RIGHT, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.02)
    with pytest.raises(kinema.ShapeError, match="one pose"):
        hands.grip(SKELETON.rest_pose((2,)), RIGHT, [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 0.02)
    with pytest.raises(kinema.ShapeError, match="pose"):
        hands.curl(humanoid().rest_pose(), RIGHT, 0.5)


@pytest.mark.parametrize("array", ["translations", "rotations", "scales"])
def test_a_pose_with_nan_or_inf_is_refused(array):
    pose = SKELETON.rest_pose()
    getattr(pose, array)[SKELETON.index("right_elbow"), 1] = np.nan if array != "scales" else np.inf
    calls = {"align_palm": lambda: hands.align_palm(pose, RIGHT, np.eye(3)),
             "curl": lambda: hands.curl(pose, RIGHT, 0.5),
             "grip": lambda: hands.grip(pose, RIGHT, [0.3, 0.2, 0.06], [1.0, 0.0, 0.0], 0.02)}
    for what, call in calls.items():
        with pytest.raises(kinema.SolverInputError, match=f"{what}: pose has NaN or inf in its {array}"):
            call()


@pytest.mark.parametrize("size", [1e160, 1e300, 1e-160, 1e-300])
def test_palm_basis_of_vectors_of_any_finite_size(size):
    """Finite vectors of any size are directions: the basis is the one of the same vectors at order 1, to rounding
    (1e-15; their squares overflow or underflow a plain norm)."""
    along, normal = np.array([0.3, -0.8, 0.5]), np.array([0.6, 0.2, -0.1])
    np.testing.assert_allclose(hands.palm_basis(along * size, normal * size), hands.palm_basis(along, normal),
                               rtol=0, atol=1e-15)


def test_palm_basis_of_nearly_parallel_vectors_is_a_rotation_to_rounding():
    """Just above PARALLEL_SINE_EPS: one Gram-Schmidt pass leaves eps / sine (1e-8 here) of ``along`` in the normal."""
    along = np.array([0.3, 0.7, 0.2])
    for sine in (4e-9, 1e-7, 1e-4):
        normal = along + sine * np.array([0.0, -0.2, 0.7])
        basis = hands.palm_basis(along, normal)
        np.testing.assert_allclose(basis.T @ basis, np.eye(3), rtol=0, atol=1e-15)
        assert np.linalg.det(basis) == pytest.approx(1.0, abs=1e-15)


def test_grip_axis_and_cylinder_of_any_finite_size():
    rng = np.random.default_rng(8)
    pose = _arm_pose(rng)
    radius = 0.022
    point, axis = _cylinder_at_palm(pose, RIGHT, radius, RIGHT.palm_basis[:, 2])
    base = hands.grip(pose, RIGHT, point, axis, radius)
    huge = hands.grip(pose, RIGHT, point, axis * 1e300, radius)  # |axis| overflows: still the same axis
    np.testing.assert_array_equal(huge.angles, base.angles)
    np.testing.assert_allclose(huge.gap, base.gap, rtol=0, atol=1e-15)
    far = hands.grip(pose, RIGHT, point + [0.0, 1e200, 0.0], [1.0, 0.0, 0.0], radius)  # out of reach, far away
    assert not far.touching.any()
    np.testing.assert_allclose(far.gap, 1e200, rtol=1e-12)  # the distance, not inf


def test_wrong_kinds_of_arguments_are_kinema_errors():
    with pytest.raises(kinema.SolverInputError, match="side must be a name"):
        hands.Hand.from_skeleton(SKELETON, ["right"])
    with pytest.raises(kinema.SolverInputError, match="finger must be a kinema.hands.Finger"):
        hands.finger_angles("index", 0.5)
    pose = SKELETON.rest_pose()
    # One joint's scales for 55 joints: refused where it is assigned (Pose's setter), and by grip for a pose
    # built without checks.
    with pytest.raises(kinema.ShapeError, match="scales"):
        pose.scales = np.ones((1, 3))
    pose = kinema.Pose._trusted(pose.translations, pose.rotations, np.ones((1, 3)))
    with pytest.raises(kinema.ShapeError, match=r"pose scales: expected shape \(\.\.\., 55, 3\), got \(1, 3\)"):
        hands.grip(pose, RIGHT, [0.3, 0.2, 0.06], [1.0, 0.0, 0.0], 0.02)


def test_malformed_hand_entries_are_skeleton_errors():
    """A hand entry of the wrong kind names the problem (it was a TypeError, a bare ValueError, or a NaN spread that
    turned every curl with spread into NaN rotations)."""
    entry = SKELETON.meta["hands"]["right"]

    def hand(**change: object) -> hands.Hand:
        meta = dict(SKELETON.meta, hands={"right": dict(entry, **change)})
        return hands.Hand.from_skeleton(kinema.Skeleton(SKELETON.names, SKELETON.parents, SKELETON.translations,
                                                        meta=meta), "right")

    def finger(**change: object) -> hands.Hand:
        fingers = [dict(f) for f in entry["fingers"]]
        fingers[1].update(change)
        return hand(fingers=tuple(fingers))

    cases = [
        (lambda: hands.Hand.from_skeleton(kinema.Skeleton(SKELETON.names, SKELETON.parents, SKELETON.translations,
                                                          meta={"hands": {"right": 3}}), "right"),
         kinema.SkeletonError, r"meta\['hands'\]\['right'\] must be a mapping, got int"),
        (lambda: hand(fingers=None), kinema.SkeletonError, r"\['fingers'\] must be a sequence of finger entries"),
        (lambda: hand(fingers=("index",)), kinema.SkeletonError, "a finger entry must be a mapping"),
        (lambda: finger(joints=5), kinema.SkeletonError, "finger 'index': joints must be a sequence of three joints"),
        (lambda: finger(name="thumb"), kinema.SkeletonError, "finger names must be unique"),
        (lambda: finger(spread_deg="x"), kinema.SolverInputError, "finger 'index' spread_deg must be a number"),
        (lambda: finger(spread_deg=float("nan")), kinema.SolverInputError, "spread_deg must be finite"),
        (lambda: hand(palm_center=(np.nan, 0.0, 0.0)), kinema.SolverInputError, "palm_center contains NaN"),
    ]
    for make, error, message in cases:
        with pytest.raises(error, match=message):
            make()


@pytest.mark.parametrize("scale", [0.01, 100.0, 1000.0])
def test_grip_is_the_same_in_any_units(scale: float) -> None:
    """The humanoid and the cylinder in centimetres, millimetres or hundredths of a metre grip with the same
    angles (to rounding) and the same ``touching`` as in metres (an absolute tolerance said a centimetre hand
    touched with 1 finger of 5), and every gap scales with the rig."""
    sk_m = SKELETON
    meta = {"hands": {side: {**dict(entry), "palm_center": [c * scale for c in entry["palm_center"]]}
                      for side, entry in sk_m.meta["hands"].items()}}
    sk = kinema.Skeleton(sk_m.names, sk_m.parents, sk_m.translations * scale, sk_m.rotations, meta=meta)
    hand_m, hand = RIGHT, hands.Hand.from_skeleton(sk, "right")
    rng = np.random.default_rng(6)
    pose_m = _arm_pose(rng)
    point, axis = _cylinder_at_palm(pose_m, hand_m, 0.022, hand_m.palm_basis[:, 2])
    pose = kinema.Pose(pose_m.translations * scale, pose_m.rotations, pose_m.scales)
    res_m = hands.grip(pose_m, hand_m, point, axis, 0.022)
    res = hands.grip(pose, hand, point * scale, axis, 0.022 * scale)
    assert res_m.touching.all()
    np.testing.assert_array_equal(res.touching, res_m.touching)
    np.testing.assert_allclose(res.angles, res_m.angles, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(res.gap, res_m.gap * scale, rtol=0.0, atol=1e-9 * scale)
