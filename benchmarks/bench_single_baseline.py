"""Single calls side by side with an earlier revision of kinema, in one run.

Run ``python benchmarks/bench_single_baseline.py [REV] [--rounds N]`` (``REV`` defaults to ``bde18ae``, the
last revision before the solver layer of issue 14, whose hand-copied fast paths set that issue's single-call
figures).  It extracts ``REV``'s ``src/kinema`` with ``git archive`` into a temporary folder (the checkout is
not touched) and times the same single calls in the two trees, each in its own fresh process with its own
numba cache folder, the two trees in turn for ``--rounds`` rounds, so both see the same machine phases:

* the free functions: two-bone with a pole (4-joint arm), CCD on the 10-bone chain (default tolerance, and
  ``tolerance=0``: always 20 sweeps, the three.js-like row) and FABRIK on the same chain;
* this tree's prepared objects (``TwoBone``, ``CCD``, ``FABRIK``) on the same calls.

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
        ref_name = name if name in base else name.replace("object", "free")
        line = f"  {name:18s} this tree {now:7.2f}"
        if ref_name in base:
            line += f"   {rev} {ref_name.split()[1]:6s} {base[ref_name]:7.2f}   ratio {now / base[ref_name]:5.2f}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
