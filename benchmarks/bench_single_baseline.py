"""Single calls side by side with an earlier revision of kinema, in one run.

Run ``python benchmarks/bench_single_baseline.py [REV] [--rounds N]`` (``REV`` defaults to ``bde18ae``, the
last revision before the solver layer of issue 14, whose hand-copied fast paths set that issue's single-call
figures).  It extracts ``REV``'s ``src/kinema`` with ``git archive`` into a temporary folder (the checkout is
not touched) and times the same single calls in the two trees, each in its own fresh process with its own
numba cache folder, the two trees in turn for ``--rounds`` rounds, so both see the same machine phases:

* the free functions: two-bone with a pole (4-joint arm), CCD on the 10-bone chain (default tolerance, and
  ``tolerance=0``: always 20 sweeps, the three.js-like row) and FABRIK on the same chain;
* this tree's prepared objects (``TwoBone``, ``CCD``, ``FABRIK``) on the same calls;
* this tree's floor for two-bone and CCD tol=0: ``kernel``, the compiled call alone (the serial driver the
  objects call, on the arguments they gave it), and ``floor``, the per-frame call written out by hand with only
  what a checked call must do around it (pose check, input conversion, the result's pose copies, the kernel's
  rows, the result record); each ratio is against the earlier tree's free function.

Each figure is a median over rounds of the best of 15 blocks of 300 calls, in microseconds, with the copy
probe of ``_machine.py`` for the machine's phase.  The problems use only the public API both trees have.
No time is asserted; the history of figures is in ``benchmarks/NOTES.md``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

ROOT = Path(__file__).resolve().parents[1]

#: The timing child, run as ``python -c CHILD`` with ``PYTHONPATH`` set to one tree's ``src``; prints JSON.
CHILD = r'''
import json, timeit
import numpy as np
import kinema

rot = kinema.rotation.from_axis_angle([[0.2, 0.9, 0.1], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                                      [0.7, 0.3, 0.6, 0.1])
arm = kinema.Skeleton(["root", "shoulder", "elbow", "wrist"], [-1, 0, 1, 2],
                      [[1.0, 0.9, -0.4], [0.2, 1.4, 0.0], [0.0, 1.0, 0.0], [0.0, 0.8, 0.0]], rot)
arm_pose = arm.rest_pose()
shoulder = kinema.forward_kinematics(arm, arm_pose).positions[1]
arm_targets = shoulder + np.random.default_rng(3).normal(size=(300, 3)) * 1.1
arm_pole = shoulder + np.array([0.0, 0.5, 3.0])
ARM = ("shoulder", "elbow", "wrist")

rng = np.random.default_rng(7)
n_bones = 10
t = np.zeros((n_bones + 1, 3))
t[1:] = rng.normal(size=(n_bones, 3)) * 0.15 + np.array([0.0, 1.0, 0.0])
t[1:] *= rng.uniform(0.6, 1.4, size=(n_bones, 1)) / np.linalg.norm(t[1:], axis=1, keepdims=True)
r = kinema.rotation.from_axis_angle(rng.normal(size=(n_bones + 1, 3)), rng.uniform(0.0, 0.15, size=n_bones + 1))
names = [f"j{k}" for k in range(n_bones + 1)]
sk = kinema.Skeleton(names, [-1] + list(range(n_bones)), t, r)
chain = (names[0], names[-1])
turned = sk.rest_pose((300,))
joints = sk.chain(*chain)
turned.rotations[:, joints] = kinema.rotation.multiply(
    turned.rotations[:, joints],
    kinema.rotation.from_rotvec(np.random.default_rng(11).normal(size=(300, joints.size, 3)) * 0.6))
targets = np.ascontiguousarray(kinema.forward_kinematics(sk, turned).positions[:, joints[-1]])
pose = sk.rest_pose()

cases = {
    "two-bone free": lambda i: kinema.solve_two_bone(arm, arm_pose, ARM, arm_targets[i], arm_pole),
    "CCD free": lambda i: kinema.solve_ccd(sk, pose, chain, targets[i]),
    "CCD free tol=0": lambda i: kinema.solve_ccd(sk, pose, chain, targets[i], tolerance=0.0),
    "FABRIK free": lambda i: kinema.solve_fabrik(sk, pose, chain, targets[i]),
}
if hasattr(kinema, "TwoBone"):
    two, ccd, ccd0, fab = kinema.TwoBone(arm, ARM), kinema.CCD(sk, chain), kinema.CCD(sk, chain, tolerance=0.0), \
        kinema.FABRIK(sk, chain)
    cases["two-bone object"] = lambda i: two.solve(arm_pose, arm_targets[i], pole=arm_pole)
    cases["CCD object"] = lambda i: ccd.solve(pose, targets[i])
    cases["CCD object tol=0"] = lambda i: ccd0.solve(pose, targets[i])
    cases["FABRIK object"] = lambda i: fab.solve(pose, targets[i])


def block(f):
    def run():
        for i in range(300):
            f(i)
    run()  # compile (first round) and warm
    return min(timeit.repeat(run, number=1, repeat=15)) / 300 * 1e6


probe = np.zeros((21, 4))
out = {"probe_ns": min(timeit.repeat(probe.copy, number=20000, repeat=3)) / 20000 * 1e9}
out.update({name: block(f) for name, f in cases.items()})

if hasattr(kinema, "TwoBone"):
    # The floor of a checked single call: the compiled serial driver the objects call, with the
    # arguments it got from each of the 300 solves above, caught at the solver module's run_driver (private:
    # this is a measurement of this tree, not API).  "kernel" times that compiled call alone, on fresh copies of
    # its arrays (it edits the rotations in place); "floor" is the per-frame call written out by hand with only
    # what a checked call must do: the pose's type and shapes, the inputs' conversion (as_float_array), three
    # pose copies for the result, the kernel's rows, the compiled call, its status and the result record.
    from kinema import _ccd as ccd_mod, _solve as solve_mod, _two_bone as two_mod
    from kinema._validate import as_float_array
    from kinema.pose import Pose
    from kinema.result import SolveResult

    def caught(mod, call):
        got, real = [], mod.run_driver

        def spy(d, n, args, own=False):
            got.append((d, [a.copy() for a in args]))
            return real(d, n, args, own)

        mod.run_driver = spy
        try:
            for i in range(300):
                call(i)
        finally:
            mod.run_driver = real
        return solve_mod._SERIAL_ENTRIES[got[0][0].serial], [tuple(a) for _, a in got]

    def kernel_block(entry, calls):
        best = float("inf")
        for _ in range(16):
            fresh = [tuple(a.copy() for a in args) for args in calls]
            t0 = timeit.default_timer()
            for args in fresh:
                entry(1, args)
            best = min(best, timeit.default_timer() - t0)
        return best / len(calls) * 1e6

    ccd_entry, ccd_calls = caught(ccd_mod, lambda i: ccd0.solve(pose, targets[i]))
    two_entry, two_calls = caught(two_mod, lambda i: two.solve(arm_pose, arm_targets[i], pole=arm_pole))
    out["CCD kernel tol=0"] = kernel_block(ccd_entry, ccd_calls)
    out["two-bone kernel"] = kernel_block(two_entry, two_calls)
    shapes_sk, shapes_arm = ccd0._pose_shapes, two._pose_shapes

    def ccd_floor(pose, target, index=ccd_calls[0][0], values=ccd_calls[0][1], opts=ccd_calls[0][7],
                  no_pole=ccd_calls[0][6]):
        if type(pose) is not Pose or (pose._translations.shape, pose._rotations.shape,
                                      pose._scales.shape) != shapes_sk:
            raise TypeError("not a pose of the chain's skeleton")
        tg = as_float_array(target, "target", (3,))
        pt, pr, ps = pose._translations.copy(), pose._rotations.copy(), pose._scales.copy()
        err, counts = ccd_mod._ONE_ITEM.outputs
        if ccd_entry(1, (index, values, pt[None], pr[None], ps[None], tg[None].copy(), no_pole, opts, err, counts)):
            raise ValueError("status")
        e = err[0]
        return SolveResult._trusted(Pose._trusted(pt, pr, ps), e <= 0.0, e, counts[0, 0], counts[1, 0],
                                    {"joints": ccd0.joints, "moved": counts[2, 0] != 0})

    fixed = two_calls[0][7:13] + (two_calls[0][-1],)  # (bend hint, end rotation, history, weight, soft, margin), hist

    def two_floor(pose, target, pole, plan=two_calls[0][0], opts=two_calls[0][1]):
        if type(pose) is not Pose or (pose._translations.shape, pose._rotations.shape,
                                      pose._scales.shape) != shapes_arm:
            raise TypeError("not a pose of the arm's skeleton")
        tg = as_float_array(target, "target", (3,))
        po = as_float_array(pole, "pole", (3,))
        pt, pr, ps = pose._translations.copy(), pose._rotations.copy(), pose._scales.copy()
        err, reached, status, hits = two_mod._ONE_ITEM.outputs
        bend = np.empty((1, 3))
        if two_entry(1, (plan, opts, pt[None], pr[None], ps[None], tg[None].copy(), po[None].copy()) + fixed[:6]
                     + (err, reached, bend, status, hits, fixed[6])) or status[0]:
            raise ValueError("status")
        return SolveResult._trusted(Pose._trusted(pt, pr, ps), reached[0], err[0], np.int64(1), hits[0],
                                    {"bend_direction": bend[0], "moved": np.True_})

    for i in (0, 7):  # the same numbers as the object's call
        a, b = ccd_floor(pose, targets[i]), ccd0.solve(pose, targets[i])
        c, d = two_floor(arm_pose, arm_targets[i], arm_pole), two.solve(arm_pose, arm_targets[i], pole=arm_pole)
        assert np.array_equal(a.pose.rotations, b.pose.rotations) and a.error == b.error
        assert np.array_equal(c.pose.rotations, d.pose.rotations) and c.error == d.error
    out["CCD floor tol=0"] = block(lambda i: ccd_floor(pose, targets[i]))
    out["two-bone floor"] = block(lambda i: two_floor(arm_pose, arm_targets[i], arm_pole))
print(json.dumps(out))
'''


def extract(rev: str, dest: Path) -> Path:
    """``rev``'s ``src/kinema`` under ``dest``; returns the ``src`` folder to put on ``PYTHONPATH``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/kinema"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def time_tree(src: Path, cache: Path) -> dict[str, float]:
    """One fresh process timing the single calls of the tree at ``src`` (numba cache in ``cache``)."""
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str]) -> None:
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    positional = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--rounds")]
    rev = positional[0] if positional else "bde18ae"
    with tempfile.TemporaryDirectory(prefix="kinema-baseline-") as tmp:
        base_dir = Path(tmp) / "base"
        base_dir.mkdir()
        trees = {rev: extract(rev, base_dir), "this tree": ROOT / "src"}
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        for _ in range(rounds):
            for k, (label, src) in enumerate(trees.items()):
                runs[label].append(time_tree(src, Path(tmp) / f"numba-cache-{k}"))  # compiled in round 1
    probes = [run["probe_ns"] for label in runs for run in runs[label]]
    print(f"single calls, median of {rounds} rounds (us per call); copy probe {min(probes):.0f}-{max(probes):.0f} ns "
          "(270-280 normal, 450+ slow)")
    names = [k for k in runs["this tree"][0] if k != "probe_ns"]
    base = {k: statistics.median(run[k] for run in runs[rev]) for k in runs[rev][0] if k != "probe_ns"}
    for name in names:
        now = statistics.median(run[name] for run in runs["this tree"])
        # the same call in the earlier tree, or its free function where it has no prepared objects
        ref_name = name if name in base else " ".join("free" if w in ("object", "kernel", "floor") else w
                                                       for w in name.split())
        line = f"  {name:18s} this tree {now:7.2f}"
        if ref_name in base:
            line += f"   {rev} {ref_name.split()[1]:6s} {base[ref_name]:7.2f}   ratio {now / base[ref_name]:5.2f}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
