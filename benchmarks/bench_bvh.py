"""BVH parse and write throughput (frames/s): kinema versus bvhio, same file, same run.

The long files repeat the real mocap file's MOTION block (19 joints, 60
channels per frame): 7,280 frames for the side-by-side with bvhio (bvhio is
~1,000x slower; 100,000 frames would take it minutes) and 100,000 frames for
kinema alone (the issue's 1 s goal).  Each benchmark stores its frames/s in
``extra_info``; nothing asserts a time.

Run: ``.venv/bin/pytest benchmarks/bench_bvh.py --benchmark-only``
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kinema.io import load_bvh, save_bvh

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"  # the test fixtures, with their provenance
REAL = SHARED / "bvh" / "test_mocapbank.bvh"

SIDE_BY_SIDE_FRAMES = 455 * 16  # 7,280
LONG_FRAMES = 100_000


def _long_file(folder: Path, n_frames: int) -> Path:
    data = REAL.read_bytes()
    head, _, rest = data.partition(b"Frame Time:")
    time_line, _, motion = rest.partition(b"\n")
    lines = [ln for ln in motion.splitlines(keepends=True) if ln.strip()]
    rows = (lines * (n_frames // len(lines) + 1))[:n_frames]
    head = head.replace(b"Frames:\t455", b"Frames:\t%d" % n_frames)
    path = folder / f"long_{n_frames}.bvh"
    path.write_bytes(head + b"Frame Time:" + time_line + b"\n" + b"".join(rows))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: Any) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("bvh_bench")
    out = {n: _long_file(folder, n) for n in (SIDE_BY_SIDE_FRAMES, LONG_FRAMES)}
    load_bvh(out[SIDE_BY_SIDE_FRAMES])  # compile / load the cached kernels outside the timings
    return out


def _rate(benchmark: Any, n_frames: int) -> None:
    benchmark.extra_info["frames"] = n_frames
    benchmark.extra_info["frames_per_s"] = round(n_frames / benchmark.stats.stats.mean)


@pytest.mark.benchmark(group="bvh-parse-7280")
def test_parse_kinema(benchmark: Any, files: dict[int, Path]) -> None:
    sk, clip = benchmark.pedantic(load_bvh, args=(files[SIDE_BY_SIDE_FRAMES],), rounds=5, iterations=1)
    assert clip.n_frames == SIDE_BY_SIDE_FRAMES
    _rate(benchmark, SIDE_BY_SIDE_FRAMES)


@pytest.mark.benchmark(group="bvh-parse-7280")
def test_parse_bvhio(benchmark: Any, files: dict[int, Path]) -> None:
    bvhio = pytest.importorskip("bvhio")
    bvh = benchmark.pedantic(bvhio.readAsBvh, args=(str(files[SIDE_BY_SIDE_FRAMES]),), rounds=1, iterations=1)
    assert bvh.FrameCount == SIDE_BY_SIDE_FRAMES
    _rate(benchmark, SIDE_BY_SIDE_FRAMES)


@pytest.mark.benchmark(group="bvh-write-7280")
def test_write_kinema(benchmark: Any, files: dict[int, Path], tmp_path: Path) -> None:
    sk, clip = load_bvh(files[SIDE_BY_SIDE_FRAMES])
    benchmark.pedantic(save_bvh, args=(tmp_path / "k.bvh", sk, clip), rounds=5, iterations=1)
    _rate(benchmark, SIDE_BY_SIDE_FRAMES)


@pytest.mark.benchmark(group="bvh-write-7280")
def test_write_bvhio(benchmark: Any, files: dict[int, Path], tmp_path: Path) -> None:
    bvhio = pytest.importorskip("bvhio")
    bvh = bvhio.readAsBvh(str(files[SIDE_BY_SIDE_FRAMES]))
    benchmark.pedantic(bvhio.writeBvh, args=(str(tmp_path / "b.bvh"), bvh), kwargs={"percision": 6},
                       rounds=1, iterations=1)
    _rate(benchmark, SIDE_BY_SIDE_FRAMES)


@pytest.mark.benchmark(group="bvh-100k")
def test_parse_kinema_100k(benchmark: Any, files: dict[int, Path]) -> None:
    sk, clip = benchmark.pedantic(load_bvh, args=(files[LONG_FRAMES],), rounds=5, iterations=1)
    assert clip.n_frames == LONG_FRAMES and sk.n_joints == 24
    _rate(benchmark, LONG_FRAMES)


@pytest.mark.benchmark(group="bvh-100k")
def test_write_kinema_100k(benchmark: Any, files: dict[int, Path], tmp_path: Path) -> None:
    sk, clip = load_bvh(files[LONG_FRAMES])
    benchmark.pedantic(save_bvh, args=(tmp_path / "k.bvh", sk, clip), rounds=3, iterations=1)
    _rate(benchmark, LONG_FRAMES)
