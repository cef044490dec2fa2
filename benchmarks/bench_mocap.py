"""Foot locking throughput and batch scaling.

* ``footlock-45500``: :func:`kinema.mocap.footlock` on the 19-joint capture
  (tests/data/bvh/test_mocapbank.bvh, a test fixture) repeated 100 times
  (45,500 frames), next to two baselines in the same run: forward kinematics
  of the same clip (a yardstick: footlock does a few FK passes' worth of work
  on the legs), and the naive per-frame approach, one two-bone call per leg
  per frame (on the first 2,000 frames; compare ``frames_per_s``).
  Goal: at least 50,000 frames/s.
* ``batch-footlock``: ``kinema batch footlock`` over 8 files of 22,750 frames
  with 1 worker (in process) and 2 workers (process pool, start-up included).

Each benchmark stores ``frames_per_s`` in ``extra_info``.  No timing is
asserted.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import kinema
from kinema import mocap
from kinema.cli import main
from kinema.cli._bench import repeat_clip
from kinema.io import load_bvh, save_bvh

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"  # the test fixtures, with their provenance
REPEATS = 100
PER_FRAME_FRAMES = 2000
BATCH_FILES = 8
BATCH_REPEATS = 50


@pytest.fixture(scope="module")
def capture() -> tuple[kinema.Skeleton, kinema.Clip]:
    return load_bvh(SHARED / "bvh" / "test_mocapbank.bvh")


@pytest.fixture(scope="module")
def long_clip(capture: tuple[kinema.Skeleton, kinema.Clip]) -> tuple[kinema.Skeleton, kinema.Clip]:
    sk, clip = capture
    long = repeat_clip(clip, clip.n_frames * REPEATS, sk.index("Hips"))
    mocap.footlock(sk, clip)  # compile
    return sk, long


def _rate(benchmark, frames: int) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info["frames"] = frames
    benchmark.extra_info["frames_per_s"] = round(frames / benchmark.stats.stats.min)


@pytest.mark.benchmark(group="footlock-45500")
def test_footlock_kinema(benchmark, long_clip) -> None:  # type: ignore[no-untyped-def]
    sk, clip = long_clip
    res = benchmark.pedantic(mocap.footlock, (sk, clip), rounds=5, iterations=1, warmup_rounds=1)
    assert res.metrics["skate_after"] <= 0.2 * res.metrics["skate_before"]
    _rate(benchmark, clip.n_frames)


@pytest.mark.benchmark(group="footlock-45500")
def test_fk_yardstick(benchmark, long_clip) -> None:  # type: ignore[no-untyped-def]
    sk, clip = long_clip
    benchmark.pedantic(kinema.forward_kinematics, (sk, clip.pose), rounds=5, iterations=1, warmup_rounds=1)
    _rate(benchmark, clip.n_frames)


@pytest.mark.benchmark(group="footlock-45500")
def test_footlock_per_frame_baseline(benchmark, long_clip) -> None:  # type: ignore[no-untyped-def]
    """Baseline: the same leg solves, one solve_two_bone call per leg per frame (targets from footlock)."""
    sk, clip = long_clip
    n = PER_FRAME_FRAMES
    short = kinema.Clip(kinema.Pose(clip.pose.translations[:n], clip.pose.rotations[:n]), clip.fps)
    res = mocap.footlock(sk, short)
    fk_out = kinema.forward_kinematics(sk, res.clip.pose)
    fk_in = kinema.forward_kinematics(sk, short.pose)
    legs = [(sk.parents[sk.parents[f]], sk.parents[f], f) for f in res.contacts.feet]
    t_in = short.pose.translations.copy()
    t_in[:, 0, 1] -= res.hips_drop
    poses = [kinema.Pose(t_in[i], short.pose.rotations[i]) for i in range(n)]

    def per_frame() -> None:
        for i in range(n):
            pose = poses[i]
            for hip, knee, foot in legs:
                pose = kinema.solve_two_bone(sk, pose, (int(hip), int(knee), int(foot)), fk_out.positions[i, foot],
                                             fk_in.positions[i, knee], end_rotation=fk_in.rotations[i, foot]).pose

    benchmark.pedantic(per_frame, rounds=3, iterations=1, warmup_rounds=1)
    _rate(benchmark, n)


@pytest.fixture(scope="module")
def batch_folder(tmp_path_factory: pytest.TempPathFactory, capture) -> Path:  # type: ignore[no-untyped-def]
    sk, clip = capture
    folder = tmp_path_factory.mktemp("batch_bench")
    long = repeat_clip(clip, clip.n_frames * BATCH_REPEATS, sk.index("Hips"))
    for i in range(BATCH_FILES):
        save_bvh(folder / f"take{i}.bvh", sk, long)
    return folder


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.benchmark(group="batch-footlock-8x22750")
def test_batch_scaling(benchmark, batch_folder: Path, tmp_path: Path, workers: int) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"

    def run() -> None:
        code = main(["batch", "footlock", str(batch_folder), "-o", str(out), "--workers", str(workers), "--force",
                     "-q", "--no-progress"])
        assert code == 0

    benchmark.pedantic(run, rounds=2, iterations=1, warmup_rounds=0)
    assert len(list(out.iterdir())) == BATCH_FILES
    _rate(benchmark, BATCH_FILES * BATCH_REPEATS * 455)
    benchmark.extra_info["workers"] = workers
    assert np.isfinite(benchmark.stats.stats.min)
