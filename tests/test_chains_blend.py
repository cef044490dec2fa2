"""solve_chains: the weight blends a sliding root too, ``moved`` is truthful with ``out``, poles broadcast; the blend
of a sliding root's translation keeps an item of weight 1 its single solve bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import kinema

SPINE_ARM = ("chest", "right_wrist")


@pytest.fixture(scope="module")
def humanoid() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray]:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    return sk, pose, kinema.forward_kinematics(sk, pose).positions


def _errors(sk: kinema.Skeleton, pose: kinema.Pose, ends: list[int], targets: list[np.ndarray]) -> np.ndarray:
    p = kinema.forward_kinematics(sk, pose).positions
    return np.stack([np.linalg.norm(p[..., e, :] - t, axis=-1) for e, t in zip(ends, targets, strict=True)], axis=-1)


def test_weight_zero_with_a_sliding_root_gives_the_input_back(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    """The chest slid (fixed_root=False) and kept its slide at weight 0, while ``moved`` said False."""
    sk, pose, P = humanoid
    target = P[sk.index("right_wrist")] + [1.5, 0.0, 0.0]
    goal = kinema.Goal(chain=SPINE_ARM, target=target, fixed_root=False)
    res = kinema.solve_chains(sk, pose, [goal], weight=0.0)
    np.testing.assert_array_equal(res.pose.translations, pose.translations)
    np.testing.assert_array_equal(res.pose.rotations, pose.rotations)
    assert not res.state["moved"]
    np.testing.assert_array_equal(res.error, _errors(sk, res.pose, [5], [target]))
    solved = kinema.solve_chains(sk, pose, [goal])
    assert solved.state["moved"]
    assert not np.array_equal(solved.pose.translations[1], pose.translations[1])  # it does slide at weight 1


@pytest.mark.parametrize("weight", [0.3, 0.75])
def test_a_partial_weight_blends_the_sliding_root_as_solve_ccd(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], weight: float) -> None:
    """The root's translation goes linearly from the input's to the solved one, as ``solve_ccd(...,
    fixed_root=False, weight=...)``; the errors are the returned pose's."""
    sk, pose, P = humanoid
    target = P[5] + [1.5, 0.3, 0.0]
    res = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, target, fixed_root=False)], weight=weight)
    ccd = kinema.solve_ccd(sk, pose, SPINE_ARM, target, fixed_root=False, weight=weight)
    full = kinema.solve_ccd(sk, pose, SPINE_ARM, target, fixed_root=False)
    t0, t1 = pose.translations[1], full.pose.translations[1]
    np.testing.assert_array_equal(res.pose.translations, ccd.pose.translations)
    np.testing.assert_array_equal(res.pose.translations[1], t0 + weight * (t1 - t0))
    np.testing.assert_allclose(res.pose.rotations, ccd.pose.rotations, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res.error, _errors(sk, res.pose, [5], [target]))
    assert res.state["moved"]


def test_a_batch_of_weights_with_a_sliding_root_is_a_loop_of_single_solves(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    target = P[5] + [1.5, 0.3, 0.0]
    goals = [kinema.Goal(SPINE_ARM, target, fixed_root=False),
             kinema.Goal(("left_hip", "left_ankle"), P[14] + [0.1, 0.2, 0.1], priority=1)]
    weights = np.array([0.0, 0.4, 1.0])
    batch = kinema.solve_chains(sk, pose, goals, weight=weights)
    for i, w in enumerate(weights):
        one = kinema.solve_chains(sk, pose, goals, weight=float(w))
        np.testing.assert_array_equal(batch.pose.translations[i], one.pose.translations)
        np.testing.assert_array_equal(batch.pose.rotations[i], one.pose.rotations)
        np.testing.assert_array_equal(batch.error[i], one.error)
        assert batch.state["moved"][i] == one.state["moved"]
    np.testing.assert_array_equal(batch.pose.translations[0], pose.translations)
    assert list(batch.state["moved"]) == [False, True, True]


@pytest.mark.parametrize("weight", [1.0, 0.0, 0.5])
def test_out_the_pose_itself_reports_moved_truthfully(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], weight: float) -> None:
    """``out=pose``: ``moved`` compared the result with the pose after out (the pose) was overwritten: False."""
    sk, _, P = humanoid
    target = P[5] + [0.2, -0.3, 0.1]
    goals = [kinema.Goal(SPINE_ARM, target)]
    ref = kinema.solve_chains(sk, sk.rest_pose(), goals, weight=weight)
    pose = sk.rest_pose()
    res = kinema.solve_chains(sk, pose, goals, weight=weight, out=pose)
    assert res.pose is pose
    assert bool(res.state["moved"]) == (weight > 0.0) == bool(ref.state["moved"])
    np.testing.assert_array_equal(pose.rotations, ref.pose.rotations)
    np.testing.assert_array_equal(res.error, ref.error)


def test_out_a_batch_the_pose_itself_reports_moved_per_item(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, rest, P = humanoid
    pose = rest.broadcast((2,))
    target = P[5] + [0.2, -0.3, 0.1]
    res = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, target)], weight=np.array([0.0, 1.0]), out=pose)
    assert list(res.state["moved"]) == [False, True]
    np.testing.assert_array_equal(pose.rotations[0], rest.rotations)


def test_a_target_that_is_a_view_into_out_is_read_before_out_is_written(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    target = P[5] + [0.2, -0.3, 0.1]
    want = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, target.copy())])
    buf = sk.rest_pose()
    buf.translations[5] = target
    res = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, buf.translations[5])], out=buf)
    assert res.pose is buf
    np.testing.assert_array_equal(buf.rotations, want.pose.rotations)
    np.testing.assert_array_equal(res.error, want.error)


def test_a_batched_pole_broadcasts_into_the_batch(humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    """A ``(2, 3)`` pole with one target crashed with numpy's bare ValueError (the batch ignored the poles)."""
    sk, pose, P = humanoid
    target = P[5] + [0.1, 0.1, 0.0]
    poles = np.stack([P[4] + [0, 0, -1], P[4] + [0, 0, 1]])
    res = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, target, pole=poles)])
    assert res.error.shape == (2, 1) and res.pose.rotations.shape == (2, sk.n_joints, 4)
    for i in range(2):
        one = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, target, pole=poles[i])])
        np.testing.assert_array_equal(res.pose.rotations[i], one.pose.rotations)
        np.testing.assert_array_equal(res.error[i], one.error)
        np.testing.assert_array_equal(res.iterations[i], one.iterations)
    assert not np.array_equal(res.pose.rotations[0], res.pose.rotations[1])  # the poles do pull differently
    # a pole of shape (1, 3) against three targets, and the poles with a second goal's batch of targets
    targets = target + np.array([[0.0, 0.0, 0.0], [0.05, 0.0, 0.0], [0.0, 0.05, 0.0]])
    wide = kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, targets, pole=poles[:1])])
    assert wide.error.shape == (3, 1)


def test_a_pole_that_does_not_broadcast_is_a_shape_error_naming_it(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    targets = P[5] + np.zeros((3, 3))
    poles = np.stack([P[4] + [0, 0, -1], P[4] + [0, 0, 1]])
    with pytest.raises(kinema.ShapeError, match="goal 'left' pole"):
        kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, targets, pole=poles, name="left")])
    with pytest.raises(kinema.SolverInputError, match="goal 'left' pole"):
        kinema.solve_chains(sk, pose, [kinema.Goal(SPINE_ARM, P[5], pole=[np.nan, 0, 0], name="left")])


@pytest.mark.parametrize("solve", [kinema.solve_fabrik, kinema.solve_ccd], ids=["fabrik", "ccd"])
def test_an_item_of_weight_one_keeps_its_sliding_root_bit_for_bit(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], solve: object) -> None:
    """A batch with weights ``[1, 0.5]`` blended the sliding root's translation of the weight-1 item too:
    ``t0 + 1 * (t - t0)`` is not always ``t`` (off in the last bit), so it was not its single solve."""
    sk, pose, P = humanoid
    rng = np.random.default_rng(0)
    slid = 0
    for _ in range(30):
        tg = P[5] + rng.normal(size=3) * 1.5
        single = solve(sk, pose, SPINE_ARM, tg, fixed_root=False)  # type: ignore[operator]
        batch = solve(sk, pose, SPINE_ARM, np.stack([tg, tg]), fixed_root=False,  # type: ignore[operator]
                      weight=np.array([1.0, 0.5]))
        slid += not np.array_equal(single.pose.translations, pose.translations)
        np.testing.assert_array_equal(batch.pose.translations[0], single.pose.translations)
        np.testing.assert_array_equal(batch.pose.rotations[0], single.pose.rotations)
        np.testing.assert_array_equal(batch.error[0], single.error)
    assert slid > 10  # the roots did slide
