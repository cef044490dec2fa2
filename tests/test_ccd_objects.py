"""CCD as an object: options set after construction, weights of explicit-list chains, flag and chain arguments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import kinema
from kinema.limits import Hinge, SwingTwist

ARM = ("right_shoulder", "right_wrist")
SPINE_ARM = ("chest", "right_wrist")


@pytest.fixture(scope="module")
def humanoid() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray]:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    return sk, pose, kinema.forward_kinematics(sk, pose).positions


def _same(a: kinema.SolveResult, b: kinema.SolveResult) -> bool:
    return all(np.array_equal(x, y) for x, y in (
        (a.pose.rotations, b.pose.rotations), (a.pose.translations, b.pose.translations), (a.error, b.error),
        (a.reached, b.reached), (a.iterations, b.iterations), (a.limits_hit, b.limits_hit),
        (a.state["moved"], b.state["moved"])))


#: (option, value, constructor options both solvers share): each value changes the solve from the base's.
CASES: list[tuple[str, Any, dict[str, Any]]] = [
    ("iterations", 1, {}),
    ("tolerance", 1e-9, {}),
    ("fixed_root", False, {}),
    ("max_step", 0.05, {}),
    ("adaptive_step", False, {"max_step": 0.05}),
    ("twist", "rest", {}),
    ("pole_max_twist", 0.02, {}),
    ("weights", {"chest": 0.25}, {}),
    ("weights", [0.0, 1.0, 0.5, 1.0], {}),
    ("limits", {"right_elbow": Hinge((1, 0, 0), -0.2, 0.2)}, {}),
    ("limits", None, {"limits": {"right_shoulder": SwingTwist((1, 0, 0), 0.3)}}),
    ("max_step", None, {"max_step": 0.05}),
]


@pytest.mark.parametrize(("name", "value", "base"), CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_an_option_set_after_construction_solves_as_if_built_with_it(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], name: str, value: Any, base: dict[str, Any]
) -> None:
    """The kernel reads options packed at construction: a set option used to be ignored by the solve (while
    ``reached`` read the new tolerance).  Now the set solver equals, bit for bit, one built with the option,
    single and batched, blended and not, and the option does change the solve."""
    sk, pose, P = humanoid
    rng = np.random.default_rng(3)
    twisted = pose.copy()
    twisted.rotations[3] = kinema.rotation.from_rotvec(np.array([0.4, 0.3, 0.2]))
    far = P[5] + [1.5, 0.2, 0.0]
    targets = np.concatenate([P[5] + rng.normal(size=(3, 3)) * 0.25, far[None]])
    pole = P[4] + [0.0, 0.0, -1.0]
    ik = kinema.CCD(sk, SPINE_ARM, **base)
    untouched = kinema.CCD(sk, SPINE_ARM, **base)
    setattr(ik, name, value)
    built = kinema.CCD(sk, SPINE_ARM, **{**base, name: value})
    changed = False
    for p in (pose, twisted):
        for kw in ({}, {"pole": pole}, {"weight": 0.5}, {"weight": np.array([1.0, 0.5, 0.0, 0.7])}):
            for tg in ([targets[0], far] if "weight" not in kw or np.ndim(kw["weight"]) == 0 else [targets]):
                got, want = ik.solve(p, tg, **kw), built.solve(p, tg, **kw)
                assert _same(got, want), (name, value, kw)
                changed |= not _same(got, untouched.solve(p, tg, **kw))
        batch = ik.solve(p, targets, pole=pole)
        assert _same(batch, built.solve(p, targets, pole=pole))
    assert changed, f"setting {name}={value!r} changed no solve: the test shows nothing"
    got_value = getattr(ik, name)
    if name == "weights":
        np.testing.assert_array_equal(got_value, built.weights)
    elif name == "limits":
        assert got_value == built.limits
    else:
        assert got_value == getattr(built, name)


@pytest.mark.parametrize(("name", "bad"), [
    ("iterations", -1), ("iterations", 2.5), ("tolerance", -1e-3), ("tolerance", math.nan),
    ("max_step", 0.0), ("max_step", "x"), ("adaptive_step", "False"), ("fixed_root", np.array([True, False])),
    ("twist", "twisty"), ("pole_max_twist", -1.0), ("weights", [1.0, 2.0, 1.0, 1.0]), ("weights", [1.0]),
    ("limits", {"right_elbow": "hinge"}), ("limits", {"nobody": Hinge((1, 0, 0), -1, 1)}),
])
def test_setting_a_bad_option_raises_naming_it_and_keeps_the_solver(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], name: str, bad: Any) -> None:
    sk, pose, P = humanoid
    ik = kinema.CCD(sk, SPINE_ARM)
    tg = P[5] + [0.2, -0.3, 0.1]
    before = ik.solve(pose, tg)
    with pytest.raises(kinema.KinemaError) as info:
        setattr(ik, name, bad)
    key = {"limits": "limit"}.get(name, name.split("_")[0])
    assert key in str(info.value) or isinstance(info.value, kinema.BoneNotFoundError), str(info.value)
    assert _same(ik.solve(pose, tg), before)


def test_weights_and_limits_read_back_read_only_and_set_again(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    lim = {"right_elbow": Hinge((1, 0, 0), -0.5, 0.5)}
    ik = kinema.CCD(sk, ["chest", "right_elbow", "right_wrist"], weights={"chest": 0.5}, limits=lim)
    np.testing.assert_array_equal(ik.weights, [0.5, 0.0, 1.0, 1.0])  # one per joint of ik.joints, helper 0
    with pytest.raises(ValueError, match="read-only"):
        ik.weights[0] = 1.0
    with pytest.raises(TypeError):
        ik.limits["right_wrist"] = lim["right_elbow"]  # type: ignore[index]
    tg = P[5] + [0.2, -0.3, 0.1]
    before = ik.solve(pose, tg)
    ik.weights = ik.weights  # the read-back form is taken back
    ik.limits = ik.limits
    assert _same(ik.solve(pose, tg), before)


def test_the_chain_and_skeleton_are_read_only(humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    ik = kinema.CCD(sk, SPINE_ARM)
    tg = P[5] + [0.2, -0.3, 0.1]
    want = ik.solve(pose, tg)
    for name, value in (("joints", np.array([3, 4, 5])), ("skeleton", kinema.samples.humanoid())):
        with pytest.raises(kinema.SolverInputError, match=f"CCD.{name} is read-only"):
            setattr(ik, name, value)
    with pytest.raises(ValueError, match="read-only"):
        ik.joints[0] = 0
    assert ik.skeleton is sk
    np.testing.assert_array_equal(ik.joints, [1, 3, 4, 5])
    assert _same(ik.solve(pose, tg), want)


# ------------------------------------------------------------------- explicit-list chains: helpers stay frozen
def test_explicit_list_weights_are_the_listed_joints_and_helpers_never_turn(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    """``["chest", "right_elbow", "right_wrist"]``: right_shoulder is a helper, documented to ride along unturned.
    An array of one weight per listed joint is the listed joints' (it was refused: one per path joint was
    wanted, and that array's helper value turned the helper); a mapping naming the helper is refused."""
    sk, pose, P = humanoid
    chain = ["chest", "right_elbow", "right_wrist"]
    helper = sk.index("right_shoulder")
    tg = P[5] + [0.1, 0.2, 0.1]
    per_listed = kinema.CCD(sk, chain, weights=[1.0, 0.5, 1.0])
    mapping = kinema.CCD(sk, chain, weights={"right_elbow": 0.5})
    full_path = kinema.CCD(sk, chain, weights=[1.0, 0.0, 0.5, 1.0])  # one per path joint, the helper's 0
    res = per_listed.solve(pose, tg)
    np.testing.assert_array_equal(res.pose.rotations[helper], pose.rotations[helper])
    assert not np.array_equal(res.pose.rotations[sk.index("chest")], pose.rotations[sk.index("chest")])
    assert not np.array_equal(res.pose.rotations[sk.index("right_elbow")], pose.rotations[sk.index("right_elbow")])
    assert _same(res, mapping.solve(pose, tg)) and _same(res, full_path.solve(pose, tg))
    np.testing.assert_array_equal(per_listed.weights, [1.0, 0.0, 0.5, 1.0])
    for weights in ([1, 1, 1, 1], {"right_shoulder": 1.0}, {3: 0.5}, np.array([0.5, 0.5, 0.5, 0.5])):
        with pytest.raises(kinema.SolverInputError, match="'right_shoulder'.*rides along"):
            kinema.CCD(sk, chain, weights=weights)
        with pytest.raises(kinema.SolverInputError, match="'right_shoulder'.*rides along"):
            kinema.solve_ccd(sk, pose, chain, tg, weights=weights)
    with pytest.raises(kinema.SolverInputError, match=r"expected 3 values .*listed.*, or 4"):
        kinema.CCD(sk, chain, weights=[1.0, 1.0])


def test_solve_chains_keeps_the_helpers_of_an_explicit_list_frozen(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    """A goal with an explicit list behind a higher goal that owns part of it: the frozen goal's weights (the
    listed ones with owned joints at 0) are built again, and its helper stays unturned."""
    sk, pose, P = humanoid
    goals = [kinema.Goal(("chest", "neck"), P[2] + [0.1, 0.0, 0.05], priority=1),
             kinema.Goal(["root", "chest", "right_elbow", "right_wrist"], P[5] + [0.1, 0.2, 0.1], weights=[1, 1, 1, 1])]
    res = kinema.solve_chains(sk, pose, goals)
    helper = sk.index("right_shoulder")
    np.testing.assert_array_equal(res.pose.rotations[helper], pose.rotations[helper])
    assert sk.index("right_elbow") in res.state["moved_joints"][1]
    assert sk.index("chest") in res.state["frozen"][1]


@pytest.mark.parametrize("weights", [{"right_elbow": 0.5, 4: 1.0}, {4: 1.0, "right_elbow": 0.5},
                                     {"right_elbow": 0.5, -11: 0.5}, {np.int64(4): 0.5, "right_elbow": 0.5}])
def test_a_weights_mapping_naming_a_joint_twice_is_refused(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], weights: dict[Any, float]) -> None:
    sk, pose, P = humanoid
    assert sk.index("right_elbow") == 4
    with pytest.raises(kinema.SolverInputError, match="'right_elbow' is given twice"):
        kinema.CCD(sk, ARM, weights=weights)
    with pytest.raises(kinema.SolverInputError, match="'right_elbow' is given twice"):
        kinema.solve_chains(sk, pose, [kinema.Goal(ARM, P[5], weights=weights)])


# ------------------------------------------------------------------- flags and chains
@pytest.mark.parametrize("option", ["fixed_root", "adaptive_step"])
@pytest.mark.parametrize("bad", ["False", "True", np.array([True, False]), np.array(True), 0, 1, 1.0, None, [True]])
def test_flag_options_are_bools_or_kinema_errors(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], option: str, bad: Any) -> None:
    """``fixed_root="False"`` meant True, an array raised numpy's bare ValueError (truth value ambiguous)."""
    sk, pose, P = humanoid
    for make in (lambda: kinema.CCD(sk, ARM, **{option: bad}),
                 lambda: kinema.solve_ccd(sk, pose, ARM, P[5], **{option: bad}),
                 lambda: kinema.solve_chains(sk, pose, [kinema.Goal(ARM, P[5], **{option: bad})])):
        with pytest.raises(kinema.SolverInputError, match=f"{option} must be True or False"):
            make()


def test_numpy_bool_flags_mean_what_they_say(humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray]) -> None:
    sk, pose, P = humanoid
    far = P[5] + [1.5, 0.0, 0.0]
    slid = kinema.CCD(sk, SPINE_ARM, fixed_root=np.False_).solve(pose, far)
    assert _same(slid, kinema.CCD(sk, SPINE_ARM, fixed_root=False).solve(pose, far))
    assert not np.array_equal(slid.pose.translations, pose.translations)
    ik = kinema.CCD(sk, SPINE_ARM, fixed_root=np.True_, adaptive_step=np.False_)
    assert ik.fixed_root is True and ik.adaptive_step is False
    from kinema._validate import check_flag  # the shared helper for every solver's flags

    assert check_flag(np.True_, "x") is True and check_flag(False, "x") is False


@pytest.mark.parametrize("chain", [np.array(5), np.array(5.0), np.array("chest"), 5, "chest", np.array([5])])
def test_a_chain_of_one_number_or_array_is_a_kinema_error(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], chain: Any) -> None:
    """``CCD(sk, np.array(5))`` raised a bare TypeError (iteration over a 0-d array)."""
    sk, pose, P = humanoid
    with pytest.raises(kinema.KinemaError):
        kinema.CCD(sk, chain)
    with pytest.raises(kinema.KinemaError):
        kinema.solve_ccd(sk, pose, chain, P[5])
