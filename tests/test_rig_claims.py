"""kinema.Rig: what a step claims beyond its turned joints (a root it translates, an end rotation it sets), and
RigResult.reached per batch item when later steps enlarge the batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kinema
from kinema import DLS, FABRIK, LookAtGoal, PositionGoal, Rig, Step, TwoBone
from kinema import rotation as R

ARM = ("right_shoulder", "right_elbow", "right_wrist")
LEFT_ARM = ("left_shoulder", "left_elbow", "left_wrist")
LEG = ("left_hip", "left_knee", "left_ankle")


@pytest.fixture(scope="module")
def body() -> kinema.Skeleton:
    return kinema.samples.humanoid()


@pytest.fixture(scope="module")
def walk() -> kinema.Pose:
    return kinema.samples.clip("walk").pose


def _legs_with_root_translation(sk: kinema.Skeleton, pose: kinema.Pose) -> DLS:
    """A DLS that lifts the left ankle 0.3 m (out of the knee's reach alone) turning only the knee, so it must
    translate the root: its ``joints`` leave the root out."""
    p = kinema.forward_kinematics(sk, pose).positions
    return DLS(sk, [PositionGoal("left_ankle", p[sk.index("left_ankle")] + [0.0, 0.3, 0.0])], joints=["left_knee"],
               root_translation=True)


# ---------------------------------------------------------------- a root translation is claimed
def test_a_step_translating_the_root_after_an_arm_is_refused(body: kinema.Skeleton, walk: kinema.Pose) -> None:
    """The issue's rig: the DLS step moves the root's translation, which carries the arm step's hand away."""
    legs = _legs_with_root_translation(body, walk[0])
    arm = TwoBone(body, ARM)
    with pytest.raises(kinema.SolverInputError,
                       match=r"step 'legs' translates joint 'root', an ancestor of joints step 'arm' claims"):
        Rig(body, [Step("arm", arm), Step("legs", legs)])
    # layered on purpose: accepted (the caller takes the carried arm)
    Rig(body, [Step("arm", arm), Step("legs", legs, layer=True)])


def test_a_root_translation_first_then_an_arm_is_accepted_and_reports_the_truth(
        body: kinema.Skeleton, walk: kinema.Pose) -> None:
    pose = walk[0]
    p = kinema.forward_kinematics(body, pose).positions
    legs = _legs_with_root_translation(body, pose)
    rig = Rig(body, [Step("legs", legs), Step("arm", TwoBone(body, ARM))])
    assert rig.moved["legs"] == (body.index("left_knee"), body.index("root"))  # the translated root is claimed
    # the hand's target: near where the raised body carries the hand (the root rises about 0.28 m)
    lifted = kinema.forward_kinematics(body, legs.solve(pose).pose).positions
    hand_target = lifted[body.index("right_wrist")] + [0.1, 0.1, 0.0]
    res = rig.solve(pose, {"legs": [None], "arm": hand_target})
    fk = kinema.forward_kinematics(body, res.pose).positions
    # the root did move (so the claim is real), and every step's reported error is the final pose's
    assert np.linalg.norm(res.pose.translations[0] - pose.translations[0]) > 0.05
    ankle_target = p[body.index("left_ankle")] + [0.0, 0.3, 0.0]
    np.testing.assert_allclose(res.steps["legs"].error, np.linalg.norm(fk[body.index("left_ankle")] - ankle_target),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.steps["arm"].error, np.linalg.norm(fk[body.index("right_wrist")] - hand_target),
                               rtol=0, atol=1e-12)
    assert bool(res.reached) and res.steps["arm"].error < 1e-9 and res.steps["legs"].error < 1e-6


def test_a_free_root_chain_claims_its_dragged_first_joint(body: kinema.Skeleton) -> None:
    """FABRIK with fixed_root=False drags its first joint (a translation) even when the step's joints leave it
    out: the chest would carry the left arm's hand."""
    reach = FABRIK(body, ("chest", "right_wrist"), fixed_root=False)
    left = Step("left_arm", TwoBone(body, LEFT_ARM))
    with pytest.raises(kinema.SolverInputError,
                       match=r"step 'reach' translates joint 'chest', an ancestor of joints step 'left_arm' claims"):
        Rig(body, [left, Step("reach", reach, joints=["right_shoulder", "right_elbow"])])
    # with a fixed root the same step moves only the listed joints: accepted
    fixed = FABRIK(body, ("chest", "right_wrist"))
    rig = Rig(body, [left, Step("reach", fixed, joints=["right_shoulder", "right_elbow"])])
    assert rig.moved["reach"] == (body.index("right_shoulder"), body.index("right_elbow"))


def test_a_ccd_root_slides_only_when_its_weight_lets_it(body: kinema.Skeleton) -> None:
    """CCD slides its first joint only while that joint's weight is > 0 (solve_chains freezes owned joints so);
    a step that lists other joints still claims a sliding root."""
    left = Step("left_arm", TwoBone(body, LEFT_ARM))
    sliding = kinema.CCD(body, ("chest", "right_wrist"), fixed_root=False)
    with pytest.raises(kinema.SolverInputError, match=r"step 'reach' translates joint 'chest'"):
        Rig(body, [left, Step("reach", sliding, joints=["right_shoulder"])])
    frozen = kinema.CCD(body, ("chest", "right_wrist"), fixed_root=False, weights=[0.0, 1.0, 1.0, 1.0])
    rig = Rig(body, [left, Step("reach", frozen, joints=["right_shoulder", "right_elbow"])])
    assert rig.moved["reach"] == (body.index("right_shoulder"), body.index("right_elbow"))


# ---------------------------------------------------------------- an end rotation is claimed
def test_a_two_bone_end_rotation_claims_the_end_joint(body: kinema.Skeleton, walk: kinema.Pose) -> None:
    """The issue's rig: the arm sets the wrist's rotation, the look turns it again."""
    fk = kinema.forward_kinematics(body, walk[0])
    w = body.index("right_wrist")
    hand_rot = R.from_axis_angle(np.array([0.0, 0.0, 1.0]), 1.0)
    arm = TwoBone(body, ARM)
    look = DLS(body, [LookAtGoal("right_wrist", fk.positions[w] + [0, -1, 0], axis=(1, 0, 0))], joints=["right_wrist"])
    with pytest.raises(kinema.SolverInputError,
                       match=r"steps 'arm' and 'look' both move joint 'right_wrist' \('arm' sets its rotation"):
        Rig(body, [Step("arm", arm, options={"end_rotation": hand_rot}), Step("look", look)])
    rig = Rig(body, [Step("arm", arm, options={"end_rotation": hand_rot})])
    assert rig.moved["arm"] == tuple(body.indices(ARM))
    # without an end rotation the arm leaves the wrist's local rotation alone: the look may follow it
    rig = Rig(body, [Step("arm", arm), Step("look", look)])
    assert rig.moved["arm"] == tuple(body.indices(ARM[:2]))
    rig = Rig(body, [Step("arm", arm, options={"end_rotation": None}), Step("look", look)])
    assert rig.moved["arm"] == tuple(body.indices(ARM[:2]))


# ---------------------------------------------------------------- reached per item over an enlarged batch
def test_reached_is_per_item_when_a_later_step_enlarges_the_batch(body: kinema.Skeleton,
                                                                  walk: kinema.Pose) -> None:
    """The issue's case: step 1 over 3 frames (frame 0 unreachable), step 2's targets (2, 3, 3)."""
    frames = walk[:3]
    p = kinema.forward_kinematics(body, frames).positions
    rig = Rig(body, [Step("arm", TwoBone(body, ARM)), Step("leg", TwoBone(body, LEG))])
    hand = p[:, body.index("right_wrist")] + [0.1, 0.1, 0.0]
    hand[0] += [5.0, 0.0, 0.0]
    foot = np.stack([p[:, body.index("left_ankle")] + [0.0, 0.02, 0.0]] * 2)
    res = rig.solve(frames, {"arm": hand, "leg": foot})
    assert res.steps["arm"].reached.tolist() == [False, True, True]
    assert res.steps["leg"].reached.tolist() == [[True] * 3] * 2
    assert res.reached.tolist() == [[False, True, True]] * 2


def test_reached_of_a_multi_goal_dls_step_under_an_enlarged_batch(body: kinema.Skeleton, walk: kinema.Pose) -> None:
    frames = walk[:3]
    p = kinema.forward_kinematics(body, frames).positions
    arms = DLS(body, [PositionGoal("left_wrist", p[0, body.index("left_wrist")]),
                      PositionGoal("right_wrist", p[0, body.index("right_wrist")])],
               joints=["left_shoulder", "left_elbow", "right_shoulder", "right_elbow"])
    rig = Rig(body, [Step("arms", arms), Step("leg", TwoBone(body, LEG))])
    right = p[:, body.index("right_wrist")] + [0.0, 0.05, 0.0]
    right[2] += [0.0, 5.0, 0.0]  # frame 2: the right hand is out of reach
    foot = np.stack([p[:, body.index("left_ankle")] + [0.0, 0.02, 0.0]] * 2)
    res = rig.solve(frames, {"arms": [p[:, body.index("left_wrist")], right], "leg": foot})
    assert res.steps["arms"].reached.tolist() == [True, True, False]
    assert res.steps["arms"].state["goal_reached"].tolist() == [[True, True], [True, True], [True, False]]
    assert res.reached.tolist() == [[True, True, False]] * 2


class _Chains:
    """A step solver over :func:`kinema.solve_chains` with one goal per chain: its ``reached`` is
    ``(*batch, n_goals)`` flags, a goal axis after the batch."""

    def __init__(self, sk: kinema.Skeleton, chains: list[tuple[str, str]]) -> None:
        self.skeleton = sk
        self.chains = chains

    def solve(self, pose: kinema.Pose, target: Any, *, weight: Any = 1.0, out: Any = None) -> kinema.SolveResult:
        goals = [kinema.Goal(chain, t, tolerance=1e-6, iterations=60) for chain, t in zip(self.chains, target,
                                                                                          strict=True)]
        return kinema.solve_chains(self.skeleton, pose, goals, weight=weight, out=out)


def test_reached_tells_a_goal_axis_from_a_batch_axis(body: kinema.Skeleton, walk: kinema.Pose) -> None:
    """A first step of three goals on one frame reports reached (3,): goals, not frames.  A later step over three
    frames must not read them as the frames' flags (the old ndim test did)."""
    pose = walk[0]
    p = kinema.forward_kinematics(body, pose).positions
    chains = [("left_shoulder", "left_wrist"), ("right_shoulder", "right_wrist"), ("right_hip", "right_ankle")]
    ends = [body.index(c[1]) for c in chains]
    targets = [p[e] for e in ends]
    targets[0] = targets[0] + [0.0, 5.0, 0.0]  # goal 0 out of reach: the step is not reached
    step = Step("chains", _Chains(body, chains), joints=["left_shoulder", "left_elbow", "right_shoulder",
                                                         "right_elbow", "right_hip", "right_knee"])
    rig = Rig(body, [step, Step("leg", TwoBone(body, LEG))])
    ankle = p[body.index("left_ankle")]
    feet = ankle + np.array([[0.0, 0.02, 0.0], [0.0, 0.03, 0.0], [0.01, 0.02, 0.0]])  # (3 frames, 3)
    res = rig.solve(pose, {"chains": targets, "leg": feet})
    assert res.steps["chains"].reached.tolist() == [False, True, True]  # per goal, one frame
    assert res.steps["leg"].reached.tolist() == [True] * 3
    assert res.reached.tolist() == [False] * 3
    # and a goal axis after a batch axis: (3 frames, 3 goals), then a step enlarging the batch to (2, 3)
    batch_targets = [np.broadcast_to(t, (3, 3)) for t in targets]
    batch_targets[0] = np.stack([targets[0], p[ends[0]], targets[0]])  # goal 0 reachable in frame 1 only
    res = rig.solve(pose.broadcast((3,)), {"chains": batch_targets, "leg": np.stack([feet, feet])})
    assert res.steps["chains"].reached.shape == (3, 3)
    assert res.steps["chains"].reached[:, 0].tolist() == [False, True, False]
    assert res.steps["chains"].reached[:, 1:].all()
    assert res.steps["leg"].reached.shape == (2, 3) and res.steps["leg"].reached.all()
    assert res.reached.tolist() == [[False, True, False]] * 2
