"""kinema._problems: the seeded problems shared by ``kinema bench`` and the tests.

The solvers' accuracy on the benchmark's own problems is checked here, so the figures the suite
prints and what the tests hold are taken on the same skeletons and targets.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import kinema
from kinema import _problems as problems
from kinema.bench import _suite
from kinema.bench._baselines import numpy_fk

REPO = Path(__file__).resolve().parents[1]


def test_builders_are_deterministic_and_a_quick_run_solves_a_prefix() -> None:
    a, b = problems.ten_bone_chain(), problems.ten_bone_chain()
    assert np.array_equal(a.targets_world, b.targets_world) and a.targets_world.shape == (1000, 3)
    assert np.array_equal(problems.ten_bone_chain(200).targets_world, a.targets_world[:200])
    assert np.array_equal(problems.tentacle(50).targets_world, problems.tentacle().targets_world[:50])
    assert np.array_equal(problems.two_bone_arm(100).targets_world, problems.two_bone_arm(1000).targets_world[:100])
    sk1, p1 = problems.fk_rig()
    sk2, p2 = problems.fk_rig()
    assert np.array_equal(sk1.parents, sk2.parents) and np.array_equal(p1.rotations, p2.rotations)
    assert p1.rotations.shape == (problems.FK_FRAMES, problems.FK_JOINTS, 4)
    assert problems.long_bvh_text(300) == problems.long_bvh_text(300)


def test_the_suite_and_the_benchmark_scripts_use_these_problems() -> None:
    suite = _suite._Suite(_suite.QUICK, lambda _m: None)
    w = suite.chain("ccd", "10bone")
    res = w.batch()  # the suite's own batch call
    direct = kinema.CCD(*_chain_args(problems.ten_bone_chain(_suite.QUICK.chain_targets)),
                        iterations=_suite.CHAIN_ITERATIONS, tolerance=0.0)
    p = problems.ten_bone_chain(_suite.QUICK.chain_targets)
    assert np.array_equal(res.error, direct.solve(p.pose, p.targets_world).error)
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import _targets  # the benchmark scripts' chain inputs
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert _targets.chain_rig is problems.chain_rig and _targets.reachable_targets is problems.reachable_targets


def _chain_args(p: problems.ChainProblem) -> tuple[kinema.Skeleton, tuple[str, str]]:
    return p.skeleton, p.chain


def test_every_ten_bone_target_is_reachable_fabrik_and_dls_meet_them() -> None:
    """The targets are made by FK, so a converged solver meets every one: FABRIK at 50 iterations
    within 1e-4 (its worst is about 2e-5), DLS with its defaults within its 1e-6 tolerance."""
    p = problems.ten_bone_chain()
    fab = kinema.FABRIK(p.skeleton, p.chain, iterations=50, tolerance=0.0).solve(p.pose, p.targets_world)
    assert np.all(fab.error <= 1e-4)
    dls = kinema.DLS(p.skeleton, [kinema.PositionGoal(p.chain[1], p.targets_world)]).solve(p.pose)
    assert dls.reached.all() and np.all(dls.error <= 1e-6)


def test_ccd_on_the_ten_bone_set_converges_with_sweeps() -> None:
    """CCD reaches more of the set with more sweeps; at 50 sweeps at least 85% within 1e-3 (89.6%
    measured), at 20 at least 70% (72.6%): the figures the suite's ccd_10bone row prints."""
    p = problems.ten_bone_chain()
    within = []
    for sweeps in (5, 20, 50):
        err = kinema.CCD(p.skeleton, p.chain, iterations=sweeps, tolerance=0.0).solve(p.pose, p.targets_world).error
        within.append(float(np.mean(err <= 1e-3)))
    assert within[0] < within[1] < within[2]
    assert within[1] >= 0.70 and within[2] >= 0.85


def test_tentacle_targets_are_reachable() -> None:
    p = problems.tentacle(200)
    res = kinema.DLS(p.skeleton, [kinema.PositionGoal(p.chain[1], p.targets_world)]).solve(p.pose)
    assert p.skeleton.chain(*p.chain).size == problems.TENTACLE_BONES + 1
    assert res.reached.all() and np.all(res.error <= 1e-6)


def test_two_bone_meets_the_best_reachable_error() -> None:
    """Two-bone is exact: its error less the least reachable distance (two_bone_best_error) is within
    1e-12 for every target, inside and beyond the reach."""
    p = problems.two_bone_arm(10_000)
    best = problems.two_bone_best_error(p)
    assert 0.2 < np.mean(best > 0) < 0.8  # the set has targets inside and beyond the reach
    res = kinema.TwoBone(p.skeleton, p.joints).solve(p.pose, p.targets_world, pole=p.pole_world)
    assert np.max(np.abs(res.error - best)) <= 1e-12


def test_fk_rig_matches_the_numpy_baseline() -> None:
    sk, pose = problems.fk_rig(200)
    ref, _ = numpy_fk(sk.parents, pose.translations, pose.rotations, pose.scales)
    assert np.max(np.abs(kinema.forward_kinematics(sk, pose).positions - ref)) <= 1e-10


def test_humanoid_four_goals_are_met() -> None:
    p = problems.humanoid_four_goals(40)
    goals = [kinema.PositionGoal(j, t[0], priority=pr)
             for j, t, pr in zip(p.goal_joints, p.targets_world, p.priorities, strict=True)]
    res = kinema.DLS(p.skeleton, goals).solve(p.pose, list(p.targets_world))
    assert np.asarray(res.state["goal_errors"]).shape == (40, 4)
    assert res.reached.all() and np.all(np.asarray(res.state["goal_errors"]) <= 1e-6)


def test_long_bvh_text_parses_to_the_repeated_walk(tmp_path: Path) -> None:
    n = 700
    path = tmp_path / "walk.bvh"
    path.write_bytes(problems.long_bvh_text(n))
    sk, clip = kinema.io.load_bvh(path)
    source = kinema.samples.clip("walk")
    assert clip.n_frames == n and n > source.n_frames
    got = kinema.forward_kinematics(sk, clip.pose).positions
    ref = kinema.forward_kinematics(kinema.samples.humanoid(), source.pose).positions
    # the file holds the text form of the sample (6 decimals): within 1e-6 m of the sample's FK
    assert np.max(np.abs(got - ref[np.arange(n) % source.n_frames])) <= 1e-6

