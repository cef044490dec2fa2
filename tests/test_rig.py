"""kinema.Rig: prepared solvers layered in order over an animated pose."""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import rotation as R


@pytest.fixture(scope="module")
def body() -> kinema.Skeleton:
    return kinema.samples.humanoid()


def _animated(sk: kinema.Skeleton, n: int, seed: int = 0) -> kinema.Pose:
    rng = np.random.default_rng(seed)
    pose = sk.rest_pose((n,))
    pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(n, sk.n_joints, 3)) * 0.1))
    return pose


def _steps(sk: kinema.Skeleton) -> list[kinema.Step]:
    return [
        kinema.Step("left_leg", kinema.TwoBone(sk, ("left_hip", "left_knee", "left_ankle"))),
        kinema.Step("right_leg", kinema.TwoBone(sk, ("right_hip", "right_knee", "right_ankle")),
                    options={"pole": [0.0, 0.0, 1.0]}),
        kinema.Step("spine", kinema.CCD(sk, ("chest", "neck")), weight=0.5),
        kinema.Step("right_arm", kinema.FABRIK(sk, ("right_shoulder", "right_wrist"))),
        kinema.Step("left_arm", kinema.TwoBone(sk, ("left_shoulder", "left_elbow", "left_wrist"))),
    ]


def _targets(sk: kinema.Skeleton, pose: kinema.Pose) -> dict[str, np.ndarray]:
    """Reachable targets: each end drawn a third of the way toward its chain's root, and the neck nudged."""
    p = kinema.forward_kinematics(sk, pose).positions

    def toward(end: str, root: str, side: list[float]) -> np.ndarray:
        e, r = p[..., sk.index(end), :], p[..., sk.index(root), :]
        return e + 0.3 * (r - e) + np.asarray(side)

    return {"left_leg": toward("left_ankle", "left_hip", [0.0, 0.0, 0.05]),
            "right_leg": toward("right_ankle", "right_hip", [0.0, 0.0, 0.05]),
            "spine": p[..., sk.index("neck"), :] + [0.05, 0.0, 0.03],
            "right_arm": toward("right_wrist", "right_shoulder", [0.0, 0.0, 0.08]),
            "left_arm": toward("left_wrist", "left_shoulder", [0.0, 0.0, 0.08])}


def test_rig_equals_running_the_steps_by_hand(body: kinema.Skeleton) -> None:
    pose = _animated(body, 12)
    targets = _targets(body, pose)
    rig = kinema.Rig(body, _steps(body))
    res = rig.solve(pose, targets)
    cur = pose
    for step in _steps(body):
        one = step.solver.solve(cur, targets[step.name], weight=step.weight, **dict(step.options))
        np.testing.assert_array_equal(one.error, res.steps[step.name].error)
        cur = one.pose
    np.testing.assert_array_equal(res.pose.rotations, cur.rotations)
    # the input was not written, and every step's reported error is the final pose's (later steps never move
    # an earlier step's joints or their ancestors)
    np.testing.assert_array_equal(pose.rotations, _animated(body, 12).rotations)
    fk = kinema.forward_kinematics(body, res.pose).positions
    for name, end in (("left_leg", "left_ankle"), ("right_leg", "right_ankle"), ("left_arm", "left_wrist"),
                      ("right_arm", "right_wrist")):
        err = np.linalg.norm(fk[:, body.index(end)] - targets[name], axis=-1)
        np.testing.assert_allclose(res.steps[name].error, err, rtol=0, atol=1e-12)
        assert np.all(err < 1e-3)
    assert res.reached.shape == (12,)


def test_rig_batch_equals_frames_one_by_one(body: kinema.Skeleton) -> None:
    pose = _animated(body, 70, seed=3)  # past the parallel threshold
    targets = _targets(body, pose)
    rig = kinema.Rig(body, _steps(body))
    batch = rig.solve(pose, targets)
    for i in (0, 33, 69):
        one = rig.solve(pose[i], {k: v[i] for k, v in targets.items()})
        np.testing.assert_array_equal(one.pose.rotations, batch.pose.rotations[i])


def test_conflicting_steps_are_refused_unless_layered(body: kinema.Skeleton) -> None:
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    with pytest.raises(kinema.SolverInputError, match="both move joint 'right_shoulder'"):
        kinema.Rig(body, [kinema.Step("a", kinema.TwoBone(body, arm)), kinema.Step("b", kinema.CCD(body, arm))])
    # the spine after an arm would carry the arm's hand away: refused too
    with pytest.raises(kinema.SolverInputError, match="ancestor"):
        kinema.Rig(body, [kinema.Step("arm", kinema.TwoBone(body, arm)),
                          kinema.Step("spine", kinema.CCD(body, ("root", "chest", "neck")))])
    rig = kinema.Rig(body, [kinema.Step("a", kinema.TwoBone(body, arm)),
                            kinema.Step("b", kinema.CCD(body, arm), layer=True)])
    assert rig.moved["b"] == (body.index("right_shoulder"), body.index("right_elbow"))
    with pytest.raises(kinema.SolverInputError, match="unknown steps"):
        rig.solve(body.rest_pose(), {"c": [0.0, 1.0, 0.0]})
    with pytest.raises(kinema.SolverInputError, match="unique"):
        kinema.Rig(body, [kinema.Step("a", kinema.TwoBone(body, arm)), kinema.Step("a", kinema.TwoBone(body, arm))])
    other = kinema.Skeleton(body.names, body.parents, body.translations, body.rotations, body.scales)
    with pytest.raises(kinema.SolverInputError, match="another skeleton"):
        kinema.Rig(body, [kinema.Step("a", kinema.TwoBone(other, arm))])


def test_missing_targets_skip_their_step_and_weights_blend(body: kinema.Skeleton) -> None:
    pose = _animated(body, 4)
    targets = _targets(body, pose)
    rig = kinema.Rig(body, _steps(body))
    res = rig.solve(pose, {"left_arm": targets["left_arm"]}, weights={"left_arm": [0.0, 1.0, 1.0, 0.0]})
    assert set(res.steps) == {"left_arm"}
    np.testing.assert_array_equal(res.pose.rotations[0], pose.rotations[0])
    np.testing.assert_array_equal(res.pose.rotations[3], pose.rotations[3])
    assert np.all(res.steps["left_arm"].error[1:3] < 1e-9)


def test_rig_of_legs_spine_and_dls_body_equals_the_steps_by_hand(body: kinema.Skeleton) -> None:
    """The issue's case: legs by two-bone, the spine by CCD, then the arms by one DLS body solve."""
    pose = _animated(body, 6, seed=7)
    targets = _targets(body, pose)
    arms = kinema.DLS(body, [kinema.PositionGoal("left_wrist", targets["left_arm"][0]),
                             kinema.PositionGoal("right_wrist", targets["right_arm"][0])],
                      joints=["left_shoulder", "left_elbow", "right_shoulder", "right_elbow"])
    steps = _steps(body)[:3] + [kinema.Step("arms", arms)]
    rig = kinema.Rig(body, steps)
    arm_targets = np.stack([targets["left_arm"], targets["right_arm"]], axis=1)  # (6, 2, 3), goal order
    res = rig.solve(pose, {"left_leg": targets["left_leg"], "right_leg": targets["right_leg"],
                           "spine": targets["spine"], "arms": list(np.moveaxis(arm_targets, 1, 0))})
    cur = pose
    for step, tgt in zip(steps, (targets["left_leg"], targets["right_leg"], targets["spine"],
                                 list(np.moveaxis(arm_targets, 1, 0))), strict=True):
        cur = step.solver.solve(cur, tgt, weight=step.weight, **dict(step.options)).pose
    np.testing.assert_array_equal(res.pose.rotations, cur.rotations)
    assert np.all(res.steps["arms"].state["goal_errors"] < 1e-6)
    # the DLS step claims the arm joints: a later two-bone on an arm is refused
    with pytest.raises(kinema.SolverInputError, match="both move"):
        kinema.Rig(body, [*steps, kinema.Step("again", kinema.TwoBone(body, ("left_shoulder", "left_elbow",
                                                                               "left_wrist")))])


def test_errors_skip_records_the_failing_step_and_keeps_going(body: kinema.Skeleton) -> None:
    pose = _animated(body, 4)
    targets = _targets(body, pose)
    bad = dict(targets, spine=np.full(3, np.nan))  # a NaN target: the CCD step refuses it
    rig = kinema.Rig(body, _steps(body))
    with pytest.raises(kinema.SolverInputError):
        rig.solve(pose, bad)  # the default policy raises
    res = rig.solve(pose, bad, errors="skip")
    assert set(res.errors) == {"spine"} and isinstance(res.errors["spine"], kinema.SolverInputError)
    assert "spine" not in res.steps and not np.any(res.reached)
    # The other steps ran exactly as a rig without the failing step would have run them.
    without = kinema.Rig(body, [s for s in _steps(body) if s.name != "spine"])
    ref = without.solve(pose, {k: v for k, v in targets.items() if k != "spine"})
    np.testing.assert_array_equal(res.pose.rotations, ref.pose.rotations)
    ok = rig.solve(pose, targets, errors="skip")
    assert ok.errors == {} and ok.reached.shape == (4,)
    with pytest.raises(kinema.SolverInputError, match="errors must be one of"):
        rig.solve(pose, targets, errors="ignore")


def test_reached_of_a_rig_whose_first_step_has_several_goals(body: kinema.Skeleton) -> None:
    """RigResult.reached is (*batch,), item by item, when the first step has several goals (G targets per item)."""
    pose = _animated(body, 3)
    p = kinema.forward_kinematics(body, pose).positions
    tree = kinema.FABRIKTree(body, ["left_wrist", "right_wrist"], root="chest")
    rig = kinema.Rig(body, [kinema.Step("arms", tree),
                            kinema.Step("left_leg", kinema.TwoBone(body, ("left_hip", "left_knee", "left_ankle")))])
    arms = p[:, body.indices(["left_wrist", "right_wrist"])]  # (3, 2, 3)
    arms[1, 0] += [0.0, 5.0, 0.0]  # item 1: the left hand out of reach
    targets = {"arms": arms, "left_leg": p[:, body.index("left_ankle")] + [0.0, 0.05, 0.02]}
    res = rig.solve(pose, targets)
    assert res.steps["arms"].reached.tolist() == [True, False, True]
    assert res.steps["left_leg"].reached.tolist() == [True, True, True]
    assert res.reached.tolist() == [True, False, True]


def test_steps_that_cannot_be_solved_are_refused_when_the_rig_is_built(body: kinema.Skeleton) -> None:
    """What a step's first solve would have thrown as a bare TypeError or AttributeError (past errors="skip"),
    the rig refuses at build time, naming the step and what is wrong."""
    arm = kinema.TwoBone(body, ("right_shoulder", "right_elbow", "right_wrist"))
    cases = [
        (kinema.Step(["arm"], arm), r"a step's name must be a string, got \['arm'\]"),
        (kinema.Step("arm", object(), joints=["right_shoulder"]), r"step 'arm': its solver \(object\) has no solve"),
        (kinema.Step("arm", arm, options=[("pole", None)]), r"step 'arm': options must be a mapping"),
        (kinema.Step("arm", arm, options={"weight": 0.5}), r"step 'arm': options may not hold \['weight'\]"),
        (kinema.Step("arm", arm, options={"out": body.rest_pose()}), r"options may not hold \['out'\]"),
        (kinema.Step("arm", arm, options={"pole": [0.0, 0.0, 1.0], "poel": 1}),
         r"step 'arm': options \['poel'\] are not keywords of TwoBone.solve \(its options: \['pole', "),
    ]
    for step, message in cases:
        with pytest.raises(kinema.SolverInputError, match=message):
            kinema.Rig(body, [step])
    # a solver's own keywords are fine, and a DLS step takes none but the rig's
    kinema.Rig(body, [kinema.Step("arm", arm, options={"pole": [0.0, 0.0, 1.0], "soft": 0.1})])
    with pytest.raises(kinema.SolverInputError, match=r"options \['pole'\] are not keywords of DLS.solve"):
        kinema.Rig(body, [kinema.Step("body", kinema.DLS(body, [kinema.PositionGoal("neck", [0.0, 1.5, 0.0])]),
                                      options={"pole": [0.0, 0.0, 1.0]})])


def test_rig_solve_refuses_what_is_not_a_pose(body: kinema.Skeleton) -> None:
    rig = kinema.Rig(body, _steps(body))
    with pytest.raises(kinema.SolverInputError, match="Rig.solve: pose must be a kinema.Pose, got str"):
        rig.solve("pose", {})  # type: ignore[arg-type]  # no step runs: the rig itself must say so
    with pytest.raises(kinema.SolverInputError, match="Rig.solve: out must be a kinema.Pose, got str"):
        rig.solve(body.rest_pose(), {}, out="out")  # type: ignore[arg-type]


def test_rig_refuses_a_nan_pose_even_when_no_step_solves(body: kinema.Skeleton) -> None:
    """Every solver refuses NaN; a rig whose steps do not run (no targets, or every one skipped) used to hand the
    NaN pose back as a result."""
    rig = kinema.Rig(body, _steps(body))
    bad = body.rest_pose()
    bad.rotations[3, 1] = np.nan
    with pytest.raises(kinema.SolverInputError, match="NaN or inf in its rotations"):
        rig.solve(bad, {})
    targets = _targets(body, body.rest_pose())
    with pytest.raises(kinema.SolverInputError, match="NaN or inf"):
        rig.solve(bad, targets, errors="skip")
    res = rig.solve(body.rest_pose(), {})  # a finite pose with no step: itself, as a copy
    np.testing.assert_array_equal(res.pose.rotations, body.rest_pose().rotations)
