"""The benchmark suite behind ``kinema bench``: every workload side by side with its baselines.

The problems come from :mod:`kinema._problems` (the same ones the tests check).  A run has four
phases, so that no figure is taken while numba's worker threads still spin after a parallel batch
on the calling thread's core: every single call first, then the peers (other processes or other
libraries), then every batch on a quiet machine, then the parallel batches again beside one busy
process.  Every time is a median over repeats with its quartiles.

A row (one per workload, :data:`ROW_FIELDS`) holds kinema's figures, one entry per peer under
``peers`` (``available`` false with a ``reason`` when it cannot run) and ``ratio_vs_<peer>`` for each
peer that ran: the peer's time per item over kinema's in the same mode (``basis``: ``batch`` compares
one batched call per item, ``single`` compares one call each), so above 1 means kinema is faster.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .. import _problems as problems
from .. import mocap
from .._ccd import CCD
from .._dls import DLS
from .._fabrik import FABRIK
from .._two_bone import TwoBone
from ..fk import forward_kinematics
from ..goals import PositionGoal
from ..io import load_bvh
from ..io._atomic import work_folder
from ..pose import Pose
from ._baselines import numpy_fk, numpy_two_bone
from ._peers import (
    PK_MAX_ITERATIONS,
    PK_TOLERANCE,
    SOURCE_ROOT,
    IkpyChain,
    TorchKinematicsChain,
    import_peer,
    threejs_harness,
)
from ._timing import Spread, busy_process, measure, per_call

__all__ = ["Sizes", "FULL", "QUICK", "ROW_FIELDS", "ACCURACY_FIELDS", "run_suite", "CHAIN_ITERATIONS"]

#: Accuracy fields of a row and of a peer entry (``None`` where a workload has no per-item error).
ACCURACY_FIELDS = ("within_1e-3", "within_1e-4", "median_error", "worst_error")
#: Fields every row has (``ratio_vs_<peer>``, ``busy`` and ``busy_over_quiet`` come on top where they apply).
ROW_FIELDS = ("workload", "title", "unit", "items", "parallel", "solves_per_s", "batch_s", "batch_s_iqr",
              "single_call_us", "single_call_us_iqr", *ACCURACY_FIELDS, "peers")
#: Sweeps per solve for the chain rows (CCD, FABRIK, three.js), with tolerance 0: every solve does
#: the same work, as three.js's CCDIKSolver (which has no tolerance) does.
CHAIN_ITERATIONS = 20


@dataclass(frozen=True)
class Sizes:
    """Problem sizes and repeats of one run (:data:`FULL` or :data:`QUICK`)."""

    two_bone_targets: int
    fk_frames: int
    chain_targets: int
    single_calls: int
    ikpy_targets: int
    pk_targets: int
    humanoid_frames: int
    bvh_frames: int
    bvhio_frames: int
    footlock_frames: int
    repeats: int


#: The issue's sizes.  ikpy takes tens of milliseconds per solve and bvhio about a thousand times
#: kinema's time per BVH frame, so they run on a prefix of the same problem.
FULL = Sizes(two_bone_targets=problems.TWO_BONE_TARGETS, fk_frames=problems.FK_FRAMES,
             chain_targets=problems.CHAIN_TARGETS, single_calls=300, ikpy_targets=20, pk_targets=200,
             humanoid_frames=problems.HUMANOID_FRAMES, bvh_frames=problems.BVH_FRAMES, bvhio_frames=500,
             footlock_frames=100_000, repeats=7)
#: ``--quick``: the same problems, smaller, fewer repeats (for tests and a first look).
QUICK = Sizes(two_bone_targets=20_000, fk_frames=problems.FK_FRAMES, chain_targets=200, single_calls=50,
              ikpy_targets=3, pk_targets=20, humanoid_frames=100, bvh_frames=5_000, bvhio_frames=50,
              footlock_frames=5_000, repeats=3)


def accuracy(errors: Any) -> dict[str, float | None]:
    """The accuracy fields of ``errors`` (any shape, world units): fractions within 1e-3 and 1e-4,
    median and worst."""
    e = np.asarray(errors, dtype=np.float64).ravel()
    if e.size == 0:
        return dict.fromkeys(ACCURACY_FIELDS)
    return {"within_1e-3": float(np.mean(e <= 1e-3)), "within_1e-4": float(np.mean(e <= 1e-4)),
            "median_error": float(np.median(e)), "worst_error": float(e.max())}


def _spread_fields(prefix: str, s: Spread | None, factor: float = 1.0) -> dict[str, Any]:
    if s is None:
        return {prefix: None, prefix + "_iqr": None}
    return {prefix: s.median * factor, prefix + "_iqr": [s.q1 * factor, s.q3 * factor]}


@dataclass
class Workload:
    """One row: kinema's calls and what the peers measured.

    ``single(i)`` solves item ``i`` alone; ``batch()`` solves all ``items`` in one call and returns
    what ``errors`` turns into per-item errors; ``peers()`` runs the baselines and returns their
    entries (each with ``basis`` and ``seconds_per_item`` when it ran).
    """

    workload: str
    title: str
    items: int
    unit: str = "solves"
    parallel: bool = False
    single: Callable[[int], Any] | None = None
    batch: Callable[[], Any] | None = None
    errors: Callable[[Any], Any] | None = None
    peers: Callable[[], dict[str, dict[str, Any]]] = dict
    extra: Callable[[Any], dict[str, Any]] | None = None
    results: dict[str, Any] = field(default_factory=dict)


def _absent(peer: Any) -> dict[str, Any]:
    return {"available": False, "reason": peer.reason}


def _ran(basis: str, seconds_per_item: Spread, n_items: int, errors: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"available": True, "basis": basis, "items": n_items,
                           "seconds_per_item": seconds_per_item.median,
                           "seconds_per_item_iqr": [seconds_per_item.q1, seconds_per_item.q3]}
    out.update(accuracy(errors) if errors is not None else dict.fromkeys(ACCURACY_FIELDS))
    out.update(extra)
    return out


class _Suite:
    """Builds the workloads of one run (problems built once, shared peers run once)."""

    def __init__(self, sizes: Sizes, status: Callable[[str], None]) -> None:
        self.sizes = sizes
        self.status = status
        self._ikpy: dict[str, Any] = {}
        self._pk: dict[str, Any] = {}
        self._threejs: Any = None

    # ------------------------------------------------------------------ peers shared by rows
    def threejs(self) -> Any:
        if self._threejs is None:
            self.status("looking for node and three.js")
            self._threejs = threejs_harness()
        return self._threejs

    def threejs_entry(self, problem: problems.ChainProblem) -> dict[str, Any]:
        peer = self.threejs()
        if not peer.available:
            return _absent(peer)
        sk = problem.skeleton
        joints = sk.chain(*problem.chain)
        rots, us = peer.module.run_ccd(sk.translations[joints], sk.rotations[joints], problem.targets_world,
                                       iteration=CHAIN_ITERATIONS, repeats=self.sizes.repeats)
        pose = sk.rest_pose((len(rots),))
        pose.rotations[:, joints] = rots
        end = forward_kinematics(sk, pose).positions[:, joints[-1]]
        seconds = Spread.of([us * 1e-6])  # node reports the median of its repeats
        return _ran("single", seconds, len(rots), np.linalg.norm(end - problem.targets_world, axis=-1),
                    note=f"{peer.reason}, CCDIKSolver iteration={CHAIN_ITERATIONS}, median of "
                         f"{self.sizes.repeats} passes timed inside node")

    def ikpy_entry(self, key: str, problem: problems.ChainProblem) -> dict[str, Any]:
        if key not in self._ikpy:
            peer = import_peer("ikpy")
            if not peer.available:
                self._ikpy[key] = _absent(peer)
            else:
                n = min(self.sizes.ikpy_targets, len(problem.targets_world))
                self.status(f"ikpy on {n} targets")
                chain = IkpyChain(peer.module, problem.skeleton)
                errors, seconds = chain.solve(problem.targets_world[:n])
                self._ikpy[key] = _ran("single", Spread.of(seconds), n, errors,
                                       note=f"ikpy {peer.reason}, defaults, first {n} targets (one solve each)")
        return self._ikpy[key]

    def pytorch_kinematics_entry(self, key: str, problem: problems.ChainProblem) -> dict[str, Any]:
        if key not in self._pk:
            peer = import_peer("pytorch_kinematics")
            if not peer.available:
                self._pk[key] = _absent(peer)
            else:
                n = min(self.sizes.pk_targets, len(problem.targets_world))
                self.status(f"pytorch_kinematics on {n} targets")
                chain = TorchKinematicsChain(peer.module, problem.skeleton)
                targets = problem.targets_world[:n]
                errors = chain.solve(targets)
                s = measure(lambda: chain.solve(targets), max(1, self.sizes.repeats // 3), warmup=0)
                self._pk[key] = _ran("batch", s.scaled(1.0 / n), n, errors,
                                     note=f"pytorch_kinematics {peer.reason} PseudoInverseIK on the CPU, position "
                                          f"only, tolerance {PK_TOLERANCE:g}, at most {PK_MAX_ITERATIONS} "
                                          f"iterations, first {n} targets in one batch")
        return self._pk[key]

    # ------------------------------------------------------------------ workloads
    def fk(self) -> Workload:
        sk, pose = problems.fk_rig(self.sizes.fk_frames)
        frames = [pose[i] for i in range(self.sizes.single_calls)]
        ref_pos, _ = numpy_fk(sk.parents, pose.translations, pose.rotations, pose.scales)

        def peers() -> dict[str, dict[str, Any]]:
            self.status("NumPy FK baseline")
            s = measure(lambda: numpy_fk(sk.parents, pose.translations, pose.rotations, pose.scales),
                        max(3, self.sizes.repeats // 2))
            return {"numpy": _ran("batch", s.scaled(1.0 / pose.rotations.shape[0]), pose.rotations.shape[0],
                                  note="vectorised over frames, a Python loop over joints; the reference for "
                                       "kinema's accuracy")}

        return Workload(
            "fk", f"FK {pose.rotations.shape[0]} frames x {sk.n_joints} joints", pose.rotations.shape[0],
            unit="frames", parallel=True, single=lambda i: forward_kinematics(sk, frames[i]),
            batch=lambda: forward_kinematics(sk, pose),
            errors=lambda res: np.linalg.norm(res.positions - ref_pos, axis=-1).max(axis=-1), peers=peers)

    def two_bone(self) -> Workload:
        p = problems.two_bone_arm(self.sizes.two_bone_targets)
        solver = TwoBone(p.skeleton, p.joints)
        best = problems.two_bone_best_error(p)
        sk, pose = p.skeleton, p.pose
        singles = [np.ascontiguousarray(t) for t in p.targets_world[: self.sizes.single_calls]]

        def numpy_call() -> Any:
            return numpy_two_bone(sk.parents, pose.translations, pose.rotations, pose.scales, p.targets_world,
                                  p.pole_world)

        def peers() -> dict[str, dict[str, Any]]:
            self.status("NumPy two-bone baseline")
            s = measure(numpy_call, max(3, self.sizes.repeats // 2))
            _, err = numpy_call()
            return {"numpy": _ran("batch", s.scaled(1.0 / len(best)), len(best), err - best,
                                  note="the same maths vectorised with NumPy")}

        return Workload(
            "two_bone", f"two-bone {len(best):,} targets (over and beyond the reach, one pole)", len(best),
            parallel=True, single=lambda i: solver.solve(pose, singles[i], pole=p.pole_world),
            batch=lambda: solver.solve(pose, p.targets_world, pole=p.pole_world),
            errors=lambda res: res.error - best, peers=peers)

    def chain(self, kind: str, which: str) -> Workload:
        n_targets = self.sizes.chain_targets
        problem = problems.ten_bone_chain(n_targets) if which == "10bone" else problems.tentacle(n_targets)
        cls = CCD if kind == "ccd" else FABRIK
        solver = cls(problem.skeleton, problem.chain, iterations=CHAIN_ITERATIONS, tolerance=0.0)
        pose, targets = problem.pose, problem.targets_world
        bones = problem.skeleton.chain(*problem.chain).size - 1

        def peers() -> dict[str, dict[str, Any]]:
            out: dict[str, dict[str, Any]] = {}
            if kind == "ccd":
                self.status(f"three.js CCDIKSolver on the {bones}-bone chain")
                out["threejs"] = self.threejs_entry(problem)
            if which == "10bone":
                out["ikpy"] = self.ikpy_entry(which, problem)
                out["pytorch_kinematics"] = self.pytorch_kinematics_entry(which, problem)
            return out

        name = "tentacle" if which == "tentacle" else "10-bone chain"
        return Workload(
            f"{kind}_{which}", f"{kind.upper()} {name} ({bones} bones), {len(targets)} reachable targets, "
                               f"{CHAIN_ITERATIONS} iterations", len(targets),
            parallel=True, single=lambda i: solver.solve(pose, targets[i]), batch=lambda: solver.solve(pose, targets),
            errors=lambda res: res.error, peers=peers)

    def dls_chain(self) -> Workload:
        problem = problems.ten_bone_chain(self.sizes.chain_targets)
        pose, targets = problem.pose, problem.targets_world
        end = problem.chain[1]
        batch_solver = DLS(problem.skeleton, [PositionGoal(end, targets)])
        single_solver = DLS(problem.skeleton, [PositionGoal(end, targets[0])])
        singles = [[t] for t in targets]

        def peers() -> dict[str, dict[str, Any]]:
            return {"ikpy": self.ikpy_entry("10bone", problem),
                    "pytorch_kinematics": self.pytorch_kinematics_entry("10bone", problem)}

        return Workload(
            "dls_10bone", f"DLS 10-bone chain, {len(targets)} reachable targets (defaults)", len(targets),
            parallel=True, single=lambda i: single_solver.solve(pose, singles[i]),
            batch=lambda: batch_solver.solve(pose), errors=lambda res: res.error, peers=peers)

    def dls_humanoid(self) -> Workload:
        p = problems.humanoid_four_goals(self.sizes.humanoid_frames)
        goals = [PositionGoal(j, t[0], priority=pr) for j, t, pr in zip(p.goal_joints, p.targets_world,
                                                                        p.priorities, strict=True)]
        solver = DLS(p.skeleton, goals)
        frames = [(p.pose[i], [t[i] for t in p.targets_world]) for i in range(min(self.sizes.single_calls,
                                                                                   p.pose.rotations.shape[0]))]
        targets = list(p.targets_world)

        def peers() -> dict[str, dict[str, Any]]:
            return {"ikpy": {"available": False, "reason": "no like-for-like: ikpy solves one chain to one goal"},
                    "pytorch_kinematics": {"available": False,
                                           "reason": "no like-for-like: one serial chain to one goal"}}

        return Workload(
            "dls_humanoid", f"DLS humanoid, 4 goals (feet pinned, hands reaching), {len(targets[0])} frames",
            len(targets[0]), unit="frames", parallel=True,
            single=lambda i: solver.solve(frames[i][0], frames[i][1]),
            batch=lambda: solver.solve(p.pose, targets),
            errors=lambda res: np.asarray(res.state["goal_errors"]).max(axis=-1), peers=peers)

    def bvh(self, folder: str) -> Workload:
        from .. import samples

        n = self.sizes.bvh_frames
        path = os.path.join(folder, f"walk_{n}.bvh")
        with open(path, "wb") as f:
            f.write(problems.long_bvh_text(n))
        sk0 = samples.humanoid()
        source = samples.clip("walk")
        ref = forward_kinematics(sk0, source.pose).positions

        def errors(loaded: Any) -> Any:
            sk, clip = loaded
            got = forward_kinematics(sk, clip.pose).positions
            return np.linalg.norm(got - ref[np.arange(clip.n_frames) % source.n_frames], axis=-1).max(axis=-1)

        def peers() -> dict[str, dict[str, Any]]:
            peer = import_peer("bvhio")
            if not peer.available:
                return {"bvhio": _absent(peer)}
            m = self.sizes.bvhio_frames
            small = os.path.join(folder, f"walk_{m}.bvh")
            with open(small, "wb") as f:
                f.write(problems.long_bvh_text(m))
            self.status(f"bvhio parsing {m} frames")
            s = measure(lambda: peer.module.readAsBvh(small), 1, warmup=0)
            return {"bvhio": _ran("batch", s.scaled(1.0 / m), m,
                                  note=f"bvhio {peer.reason} readAsBvh on the first {m} frames of the same file")}

        return Workload("bvh_parse", f"BVH parsing, {n:,} frames ({sk0.n_joints} joints)", n, unit="frames",
                        batch=lambda: load_bvh(path), errors=errors, peers=peers)

    def footlock(self) -> Workload:
        sk, clip = problems.long_walk(self.sizes.footlock_frames)
        return Workload(
            "footlock", f"foot locking, the walk repeated to {clip.n_frames:,} frames", clip.n_frames,
            unit="frames", batch=lambda: mocap.footlock(sk, clip), errors=None,
            extra=lambda res: {"skate_reduction": res.metrics["skate_reduction"],
                               "worst_error": res.metrics["ik_error_max"]},
            peers=lambda: {})

    def workloads(self, folder: str) -> list[Workload]:
        return [self.fk(), self.two_bone(), self.chain("ccd", "10bone"), self.chain("fabrik", "10bone"),
                self.chain("ccd", "tentacle"), self.chain("fabrik", "tentacle"), self.dls_chain(),
                self.dls_humanoid(), self.bvh(folder), self.footlock()]


def motion_sweeps_row(quick: bool, bench_motion: Path | None = None) -> dict[str, Any]:
    """The motion-quality sweeps (issue 18) as one row, when this build has them: ``kinema._sweeps``
    importable and ``benchmarks/bench_motion.py`` of the source tree (or ``bench_motion``) offering
    ``figures(quick=...)``, a mapping of figure names to numbers; else a row saying they are not
    available."""
    row: dict[str, Any] = {"workload": "motion_sweeps", "title": "motion-quality sweeps", "unit": "figures",
                           "items": 0, "parallel": False, "peers": {}}
    try:
        importlib.import_module("kinema._sweeps")
    except ImportError:
        return {**row, "available": False, "reason": "not available: this build has no kinema._sweeps"}
    path = bench_motion if bench_motion is not None else SOURCE_ROOT / "benchmarks" / "bench_motion.py"
    if not path.is_file():
        return {**row, "available": False,
                "reason": f"not available: {path.name} (benchmarks/ in the source tree) not found"}
    spec = importlib.util.spec_from_file_location("_kinema_bench_motion", path)
    if spec is None or spec.loader is None:
        return {**row, "available": False, "reason": f"not available: cannot load {path}"}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = getattr(module, "figures", None)
    if not callable(figures):
        return {**row, "available": False, "reason": f"not available: {path.name} has no figures(quick=...)"}
    t0 = time.perf_counter()
    values = {str(k): float(v) for k, v in dict(figures(quick=quick)).items()}
    return {**row, "available": True, "seconds": time.perf_counter() - t0, "figures": values,
            "items": len(values)}


def _errors_of(w: Workload, result: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(accuracy(w.errors(result)) if w.errors is not None
                               else dict.fromkeys(ACCURACY_FIELDS))
    if w.extra is not None:
        out.update(w.extra(result))
    return out


def run_suite(sizes: Sizes, *, quick: bool = False, busy: bool = True,
              status: Callable[[str], None] = lambda _msg: None) -> dict[str, Any]:
    """Run every workload; returns ``{"rows": [...], "sizes": ..., "busy_pid": ..., ...}`` (JSON-ready)."""
    suite = _Suite(sizes, status)
    started = time.time()
    with work_folder("bench") as folder:
        status("building the problems")
        workloads = suite.workloads(folder)
        status("compiling kernels (first use, cached afterwards)")
        for w in workloads:
            if w.single is not None:
                w.single(0)
            if w.batch is not None:
                w.results["result"] = w.batch()
        for w in workloads:  # single calls first: nothing parallel has run just before
            if w.single is not None:
                status(f"single calls: {w.title}")
                w.results["single"] = per_call(w.single, min(sizes.single_calls, w.items), sizes.repeats)
        for w in workloads:
            w.results["peers"] = w.peers()
        for w in workloads:
            if w.batch is not None:
                status(f"batch: {w.title}")
                w.results["batch"] = measure(w.batch, sizes.repeats)
        busy_pid = None
        if busy:
            with busy_process() as proc:
                busy_pid = proc.pid
                for w in workloads:
                    if w.parallel and w.batch is not None:
                        status(f"batch beside a busy process: {w.title}")
                        w.results["busy"] = measure(w.batch, sizes.repeats)
        rows = [_row(w) for w in workloads]
    rows.append(motion_sweeps_row(quick))
    return {"kinema_bench": 1, "quick": quick, "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
            "repeats": sizes.repeats, "seconds": time.time() - started, "busy_pid": busy_pid, "rows": rows}


def _row(w: Workload) -> dict[str, Any]:
    batch: Spread | None = w.results.get("batch")
    single: Spread | None = w.results.get("single")
    row: dict[str, Any] = {"workload": w.workload, "title": w.title, "unit": w.unit, "items": w.items,
                           "parallel": w.parallel, "available": True,
                           "solves_per_s": w.items / batch.median if batch else None}
    row.update(_spread_fields("batch_s", batch))
    row.update(_spread_fields("single_call_us", single, 1e6))
    row.update(_errors_of(w, w.results["result"]))
    peers = w.results["peers"]
    row["peers"] = peers
    for name, entry in peers.items():
        if not entry.get("available"):
            continue
        own: float | None = None
        if entry["basis"] == "batch" and batch is not None:
            own = batch.median / w.items
        elif entry["basis"] == "single" and single is not None:
            own = single.median
        if own:
            row[f"ratio_vs_{name}"] = entry["seconds_per_item"] / own
    busy: Spread | None = w.results.get("busy")
    if busy is not None and batch is not None:
        row["busy"] = {"batch_s": busy.median, "batch_s_iqr": [busy.q1, busy.q3],
                       "solves_per_s": w.items / busy.median}
        row["busy_over_quiet"] = busy.median / batch.median
    return row


def _solve_one(solver: Any, pose: Pose, targets: Any, i: int) -> Any:
    return solver.solve(pose, targets[i])


def chain_accuracy_curves(sizes: Sizes, iterations: tuple[int, ...],
                          status: Callable[[str], None] = lambda _msg: None) -> list[dict[str, Any]]:
    """For the plot: on the 10-bone set, each solver at several iteration counts (and each peer that
    runs): ``{"solver", "iterations", "us_per_solve", "median_error", "within_1e-4"}``, where
    ``us_per_solve`` is one single call's median (the per-solve cost a user pays frame by frame)."""
    problem = problems.ten_bone_chain(sizes.chain_targets)
    pose, targets = problem.pose, problem.targets_world
    n_single = min(sizes.single_calls, len(targets))
    points: list[dict[str, Any]] = []
    solver_classes: tuple[tuple[str, type[CCD] | type[FABRIK]], ...] = (("kinema CCD", CCD), ("kinema FABRIK", FABRIK))
    for name, cls in solver_classes:
        for it in iterations:
            status(f"{name}, {it} iterations")
            solver = cls(problem.skeleton, problem.chain, iterations=it, tolerance=0.0)
            err = solver.solve(pose, targets).error
            s = per_call(partial(_solve_one, solver, pose, targets), n_single, sizes.repeats)
            points.append({"solver": name, "iterations": it, "us_per_solve": s.median * 1e6, **accuracy(err)})
    dls = DLS(problem.skeleton, [PositionGoal(problem.chain[1], targets)])
    one = DLS(problem.skeleton, [PositionGoal(problem.chain[1], targets[0])])
    s = per_call(lambda i: one.solve(pose, [targets[i]]), n_single, sizes.repeats)
    points.append({"solver": "kinema DLS (defaults)", "iterations": None, "us_per_solve": s.median * 1e6,
                   **accuracy(dls.solve(pose).error)})
    suite = _Suite(sizes, status)
    three = suite.threejs()
    if three.available:
        for it in iterations:
            status(f"three.js CCDIKSolver, {it} iterations")
            sk = problem.skeleton
            joints = sk.chain(*problem.chain)
            rots, us = three.module.run_ccd(sk.translations[joints], sk.rotations[joints], targets, iteration=it,
                                            repeats=sizes.repeats)
            p = sk.rest_pose((len(rots),))
            p.rotations[:, joints] = rots
            end = forward_kinematics(sk, p).positions[:, joints[-1]]
            points.append({"solver": "three.js CCDIKSolver", "iterations": it, "us_per_solve": us,
                           **accuracy(np.linalg.norm(end - targets, axis=-1))})
    for label, entry in (("ikpy", suite.ikpy_entry("10bone", problem)),
                         ("pytorch_kinematics (batch)", suite.pytorch_kinematics_entry("10bone", problem))):
        if entry.get("available"):
            points.append({"solver": label, "iterations": None, "us_per_solve": entry["seconds_per_item"] * 1e6,
                           **{k: entry[k] for k in ACCURACY_FIELDS}})
    return points


def batch_size_curves(sizes: Sizes, batch_sizes: tuple[int, ...],
                      status: Callable[[str], None] = lambda _msg: None) -> list[dict[str, Any]]:
    """For the plot: solves per second against batch size for each solver (one batched call each,
    median of ``sizes.repeats``): ``{"solver", "batch", "solves_per_s"}``."""
    chain = problems.ten_bone_chain(max(batch_sizes))
    arm = problems.two_bone_arm(max(batch_sizes))
    fk_sk, fk_pose = problems.fk_rig(max(batch_sizes))
    two = TwoBone(arm.skeleton, arm.joints)
    ccd = CCD(chain.skeleton, chain.chain, iterations=CHAIN_ITERATIONS, tolerance=0.0)
    fab = FABRIK(chain.skeleton, chain.chain, iterations=CHAIN_ITERATIONS, tolerance=0.0)
    dls = {n: DLS(chain.skeleton, [PositionGoal(chain.chain[1], chain.targets_world[:n])]) for n in batch_sizes}
    calls: dict[str, Callable[[int], Any]] = {
        "two-bone (arm)": lambda n: two.solve(arm.pose, arm.targets_world[:n], pole=arm.pole_world),
        "CCD (10 bones)": lambda n: ccd.solve(chain.pose, chain.targets_world[:n]),
        "FABRIK (10 bones)": lambda n: fab.solve(chain.pose, chain.targets_world[:n]),
        "DLS (10 bones)": lambda n: dls[n].solve(chain.pose),
        "FK (60 joints, frames)": lambda n: forward_kinematics(fk_sk, Pose(fk_pose.translations[:n],
                                                                           fk_pose.rotations[:n],
                                                                           fk_pose.scales[:n])),
    }
    points = []
    for name, call in calls.items():
        status(f"batch sizes: {name}")
        for n in batch_sizes:
            s = measure(partial(call, n), sizes.repeats)
            points.append({"solver": name, "batch": n, "solves_per_s": n / s.median})
    return points
