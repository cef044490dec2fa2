"""CCD stalls the sweeps cannot leave on their own (``kinema._kernels.ccd.ccd_item``'s stall branch).

* A straight chain of three or more bones aimed *away* from a target on its line: the first sweeps flip it into a
  zig-zag lying on the line, its end short of the target, and every joint then sees the end and the target in one
  direction.  Before, a 6-bone tentacle stopped 0.3 short of a reachable target (tip at -0.8 for -1.1) and 1.2
  from an unreachable one (best 0.8).  Now the joint at the end of the bone pointing away is moved off the line
  and the sweeps unfold the chain.
* A fold whose bend a one-sided hinge blocks: before, the chain went straight again and the solve stopped
  (error 0.176 after 4 sweeps where FABRIK and DLS reach the target).  Now the fold is tried toward the mirrored
  side, then the two sides square to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import kinema
from kinema.limits import Hinge

BONE = 0.2
TOL = 1e-4


def _tentacle(n: int, axis: tuple[float, float, float]) -> kinema.Skeleton:
    """``n`` bones of length ``BONE`` in a straight line along ``axis`` from the origin."""
    return kinema.Skeleton([f"j{k}" for k in range(n + 1)], list(range(-1, n)),
                           [[0.0, 0.0, 0.0]] + [[BONE * a for a in axis]] * n)


def _positions(sk: kinema.Skeleton, pose: kinema.Pose) -> np.ndarray:
    return np.asarray(kinema.forward_kinematics(sk, pose).positions)


AXES = [(0.0, 1.0, 0.0), (-1.0, 0.0, 0.0), (0.0, 0.0, 1.0)]


@pytest.mark.parametrize("axis", AXES)
def test_a_tentacle_reaches_a_target_behind_it_on_its_line(axis: tuple[float, float, float]) -> None:
    """The reported case (6 bones, reach 1.2, target 1.1 behind): reached within 600 sweeps (about 480 are
    needed; before: stuck 0.3 short after 93, at any iteration count)."""
    sk = _tentacle(6, axis)
    tg = -1.1 * np.asarray(axis)
    res = kinema.solve_ccd(sk, sk.rest_pose(), (0, 6), tg, iterations=600, tolerance=TOL)
    p = _positions(sk, res.pose)
    assert bool(res.reached) and float(res.error) <= TOL
    assert abs(float(np.linalg.norm(p[6] - tg)) - float(res.error)) <= 1e-12  # FK agrees
    np.testing.assert_allclose(sk.bone_lengths(res.pose), sk.bone_lengths(sk.rest_pose()), rtol=1e-9, atol=0.0)


@pytest.mark.parametrize("n", [4, 6, 8])
@pytest.mark.parametrize("axis", AXES)
def test_an_unreachable_target_behind_a_straight_chain_ends_with_the_chain_pointing_at_it(
        n: int, axis: tuple[float, float, float]) -> None:
    """Before: the zig-zag stayed (error 2.0 for 8 bones where 0.8 is the best).  Now the error is the best
    possible, distance - reach, and every joint lies on the ray toward the target at its distance along the
    chain (to 1e-3 of the reach: CCD stops once no joint turns by 1e-5 rad)."""
    sk = _tentacle(n, axis)
    reach = BONE * n
    tg = -1.5 * reach * np.asarray(axis)
    res = kinema.solve_ccd(sk, sk.rest_pose(), (0, n), tg, iterations=1000, tolerance=TOL)
    assert abs(float(res.error) - 0.5 * reach) <= 1e-6 * reach
    p = _positions(sk, res.pose)
    ray = -np.asarray(axis)
    np.testing.assert_allclose(p, np.arange(n + 1)[:, None] * BONE * ray, rtol=0.0, atol=1e-3 * reach)


def test_a_frozen_joint_before_the_bone_pointing_away_keeps_the_chain_as_it_stalls() -> None:
    """No turnable joint at the bone pointing away (the root frozen, its bone pointing up, away from the target):
    no seed; the rest of the chain hangs straight down from it, the best it can do (0.3 short)."""
    sk = _tentacle(6, (0.0, 1.0, 0.0))
    w = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    res = kinema.solve_ccd(sk, sk.rest_pose(), (0, 6), [0.0, -1.1, 0.0], iterations=600, tolerance=TOL, weights=w)
    assert abs(float(res.error) - 0.3) <= 1e-6
    p = _positions(sk, res.pose)
    np.testing.assert_allclose(p[1:, 1], 0.2 - BONE * np.arange(6), rtol=0.0, atol=1e-5)


ARM = kinema.Skeleton(["j0", "j1", "j2"], [-1, 0, 1], [[0.0, 0.0, 0.0], [0.0, 0.3, 0.0], [0.0, 0.3, 0.0]])


@pytest.mark.parametrize("lo,hi", [(0.0, 150.0), (-150.0, 0.0)])
@pytest.mark.parametrize("tg", [(0.3, 0.3, 0.0), (-0.3, 0.3, 0.0), (0.2, 0.1, 0.0), (-0.1, 0.4, 0.0)])
def test_a_one_sided_elbow_hinge_under_a_ball_root_reaches_targets_either_side(
        lo: float, hi: float, tg: tuple[float, float, float]) -> None:
    """The reported case is (0, 150) with (0.3, 0.3, 0): before, 0.176 short after 4 sweeps.  The free root
    turns the bend plane round so that the elbow bends the allowed way: every target here is reached within 100
    sweeps (26 for the reported case), and the elbow stays within its hinge."""
    lim = Hinge((0.0, 0.0, 1.0), lo, hi, degrees=True)
    res = kinema.solve_ccd(ARM, ARM.rest_pose(), ("j0", "j2"), np.asarray(tg), iterations=100, tolerance=1e-5,
                           limits={"j1": lim})
    assert bool(res.reached) and float(res.error) <= 1e-5
    assert lim.contains(res.pose.rotations[1], ARM.rotations[1])
    assert abs(float(np.linalg.norm(_positions(ARM, res.pose)[2] - tg)) - float(res.error)) <= 1e-12


# ---------------------------------------------------------------- the helpers' degenerate cases
# The kernels' helpers run only inside kernels, or as plain Python with NUMBA_DISABLE_JIT=1 (the same code): each
# check below runs in a subprocess without JIT.

def _nojit(setup: str, **exprs: str) -> dict[str, Any]:
    """The values of ``exprs`` (Python expressions, by name) after ``setup``, computed in plain Python
    (``NUMBA_DISABLE_JIT=1``: a kernel helper has no Python entry with the JIT on), as JSON (tuples as lists)."""
    script = ("import json\nimport numpy as np\nfrom kinema._kernels import ccd, chain\n" + textwrap.dedent(setup)
              + f"\nEXPRS = {exprs!r}\n"
              + "print(json.dumps({k: np.asarray(eval(e)).tolist() for k, e in EXPRS.items()}))\n")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_backward_bone_finds_the_bone_pointing_away_nearest_the_end() -> None:
    got = _nojit("""
    zig = np.array([[0, 0, 0], [0, 0.2, 0], [0, 0, 0], [0, -0.2, 0], [0, -0.4, 0]], float)
    w = np.ones(5)
    w0 = w.copy()
    w0[0] = 0.0
    tgt = (0.0, -1.0, 0.0)
    two = np.array([[0, 0, 0], [0, 0.2, 0], [0, 0, 0], [0, 0.2, 0], [0, 0, 0]], float)  # up, down, up, down
    bent = zig.copy()
    bent[3] = [0.01, -0.2, 0]
    near = zig.copy()
    near[3] = [1e-5, -0.2, 0]  # 5e-5 rad off the line: a stall's residue, on the line
    straight = np.array([[0, 0, 0], [0, -0.2, 0], [0, -0.4, 0]], float)
    """, zig="ccd._backward_bone(zig, tgt, 0.8, w)", frozen="ccd._backward_bone(zig, tgt, 0.8, w0)",
                 two="ccd._backward_bone(two, tgt, 0.8, w)",
                 on_target="ccd._backward_bone(zig, (0.0, -0.4 + 1e-7, 0.0), 0.8, w)",
                 past_end="ccd._backward_bone(zig, (0.0, 0.5, 0.0), 0.8, w)",
                 bent="ccd._backward_bone(bent, tgt, 0.8, w)", near="ccd._backward_bone(near, tgt, 0.8, w)",
                 straight="ccd._backward_bone(straight, tgt, 0.4, np.ones(3))",
                 one_bone="ccd._backward_bone(straight[:2], tgt, 0.2, np.ones(2))")
    assert got["zig"] == 1
    assert got["frozen"] == -1  # its joint is frozen: none turnable
    assert got["two"] == 3  # the one nearest the end
    assert got["on_target"] == -1  # end on the target: no line
    assert got["past_end"] == -1  # joints past the end: the fold's case
    assert got["bent"] == -1  # bent: the sweeps have a side
    assert got["near"] == 1
    assert got["straight"] == -1  # stretched toward it: nothing to unfold
    assert got["one_bone"] == -1  # one bone: no joint to move


def test_retry_side_cycles_through_the_mirror_and_the_square_sides() -> None:
    got = _nojit("""
    pos = np.array([[0, 0, 0], [0, 1, 0], [0, 2, 0]], float)
    rot = np.array([[0, 0, 0, 1]] * 3, float)
    side = (1.0, 0.0, 0.0)
    short = pos.copy()
    short[2] = short[1]
    """, sides="[ccd._retry_side(pos, rot, 1, side, n) for n in (1, 2, 3)]",
                 short="ccd._retry_side(short, rot, 1, side, 1)",
                 along="ccd._retry_side(pos, rot, 1, (0.0, 1.0, 0.0), 1)")
    assert got["sides"][0] == [-1.0, 0.0, 0.0]
    assert np.allclose(got["sides"][1], np.cross([0, 1, 0], [1, 0, 0]), rtol=0.0, atol=1e-15)
    assert np.allclose(got["sides"][2], -np.cross([0, 1, 0], [1, 0, 0]), rtol=0.0, atol=1e-15)
    assert got["short"] == [0.0, 0.0, 0.0]  # zero-length bone: no side
    assert got["along"] == [0.0, 0.0, 0.0]  # side along the bone


def test_frame_side_is_fold_directions_rule_for_a_straight_joint() -> None:
    got = _nojit("""
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        p = rng.normal(size=3)
        cases.append((tuple(q), tuple(u), tuple(p)))
    """, fold="[chain.fold_direction(q, tuple(p - np.array(u)), p, tuple(p + np.array(u))) for q, u, p in cases]",
                 frame="[chain.frame_side(q, u) for q, u, p in cases]")
    assert len(got["fold"]) == 50
    np.testing.assert_allclose(got["fold"], got["frame"], rtol=0.0, atol=1e-12)
