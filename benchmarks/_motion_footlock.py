"""Foot-lock motion-quality figures (issue 18, point 4), measured by a contact rule kinema did not choose.

:func:`figures` returns, for every capture in ``tests/data/bvh`` and the
bundled walk, the figures ``benchmarks/bench_motion.py`` prints side by side
with the landed behaviour's:

* skate cut by this module's own contact rule (:func:`low_and_slow`, written
  here from scratch: it shares no code and no threshold with
  :func:`kinema.mocap.detect_contacts`), and by kinema's built-in contacts;
* stance drift: the largest horizontal spread (millimetres) of the locked
  foot across one stance of the own rule (``STANCE_EDGE_S`` left out at each
  end);
* the legs' largest angular speed after foot lock over the input's, per leg
  joint, the worst joint.

The own rule: a frame pair is *planted* when the foot is low at both frames
(at most ``LOW_FRACTION`` of its leg length above its ``FLOOR_PERCENTILE``
percentile height) and slow between them (horizontal speed at most
``SLOW_FRACTION`` leg lengths per second).  A stance is a run of planted
pairs lasting at least ``MIN_STANCE_S``.  Skate is the mean horizontal foot
speed over the planted pairs (found on the input; the same pairs are measured
on the output), as in the issue.  :data:`RULE_VARIANTS` gives a stricter and
a looser version of the rule, reported beside the main one so that the figure
does not hang on one choice of numbers.

``LANDED`` holds the figures of the code before this change (commit
``8c97601``), measured with this same module by running it against that
commit's ``src`` (``git archive 8c97601 src | tar -x -C OLD``, then
``PYTHONPATH=OLD/src python -c "import _motion_footlock as m; print(m.measure_all())"``
from this folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import kinema
from kinema import mocap
from kinema.io import load_bvh

__all__ = [
    "Capture",
    "CAPTURES",
    "FLOOR_PERCENTILE",
    "LOW_FRACTION",
    "SLOW_FRACTION",
    "MIN_STANCE_S",
    "STANCE_EDGE_S",
    "RULE_VARIANTS",
    "LANDED",
    "load_capture",
    "leg_length",
    "low_and_slow",
    "stances",
    "skate",
    "skate_cut",
    "stance_drift",
    "speed_ratio",
    "measure",
    "measure_all",
    "figures",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "bvh"

#: Own contact rule: the floor of a foot is this percentile of its height over the clip.
FLOOR_PERCENTILE = 5.0
#: Low: at most this fraction of the leg length (hip to knee plus knee to foot) above the floor.
LOW_FRACTION = 0.05
#: Slow: horizontal speed at most this many leg lengths per second.
SLOW_FRACTION = 0.3
#: A stance is a run of planted frame pairs at least this long (seconds).
MIN_STANCE_S = 0.2
#: Stance drift leaves out this many seconds at each end of a stance: at heel strike and toe-off two
#: reasonable rules disagree by a frame or two about where the stance begins and ends.
STANCE_EDGE_S = 0.1
#: The main rule and a stricter and a looser one: ``(name, low fraction, slow fraction)``.
RULE_VARIANTS = (("own", LOW_FRACTION, SLOW_FRACTION), ("own strict", 0.04, 0.2), ("own loose", 0.08, 0.5))

#: The captures: file (``None``: the bundled walk), feet named by hand (not found by kinema), metres per unit.
#: What each file is: tests/data/bvh/SOURCES.md.


@dataclass(frozen=True)
class Capture:
    name: str
    file: str | None
    feet: tuple[str, str]
    metres_per_unit: float


CAPTURES = (
    Capture("test_mocapbank", "test_mocapbank.bvh", ("LeftAnkle", "RightAnkle"), 0.01),
    Capture("bvhtools-test", "bvhtools-test.bvh", ("LeftFoot", "RightFoot"), 0.01),
    Capture("bvhtools-test2", "bvhtools-test2.bvh", ("LeftFoot", "RightFoot"), 0.01),
    Capture("bvhtools-test3", "bvhtools-test3.bvh", ("foot.L", "foot.R"), 1.0),
    Capture("sample walk", None, ("left_ankle", "right_ankle"), 1.0),
)

#: Figures of the landed code (commit 8c97601), measured as the module docstring says, rounded to 4
#: decimals: ``{capture: {figure: value}}`` with the keys of :func:`measure` (``locks``: contacts found).
LANDED: dict[str, dict[str, float]] = {
    "test_mocapbank": {
        "skate cut, own rule": 0.79,
        "skate cut, own strict rule": 0.8104,
        "skate cut, own loose rule": 0.7586,
        "skate cut, built-in rule": 1.0,
        "stance drift": 14.9723,
        "leg angular speed ratio": 1.0045,
        "locks": 6,
    },
    "bvhtools-test": {
        "skate cut, own rule": 0.2499,
        "skate cut, own strict rule": 0.381,
        "skate cut, own loose rule": 0.1405,
        "skate cut, built-in rule": 1.0,
        "stance drift": 12.6936,
        "leg angular speed ratio": 1.0105,
        "locks": 77,
    },
    "bvhtools-test2": {
        "skate cut, own rule": 0.79,
        "skate cut, own strict rule": 0.8672,
        "skate cut, own loose rule": 0.5722,
        "skate cut, built-in rule": 1.0,
        "stance drift": 0.0,
        "leg angular speed ratio": 1.002,
        "locks": 74,
    },
    "bvhtools-test3": {
        "skate cut, own rule": 0.8314,
        "skate cut, own strict rule": 0.9412,
        "skate cut, own loose rule": 0.6436,
        "skate cut, built-in rule": 1.0,
        "stance drift": 21.434,
        "leg angular speed ratio": 6.9714,
        "locks": 9,
    },
    "sample walk": {
        "skate cut, own rule": 0.8745,
        "skate cut, own strict rule": 1.0,
        "skate cut, own loose rule": 0.829,
        "skate cut, built-in rule": 1.0,
        "stance drift": 0.0,
        "leg angular speed ratio": 1.2429,
        "locks": 2,
    },
}


def load_capture(capture: Capture) -> tuple[kinema.Skeleton, kinema.Clip]:
    if capture.file is None:
        return kinema.samples.humanoid(), kinema.samples.clip("walk")
    return load_bvh(DATA / capture.file)


def leg_length(world: FloatArray, skeleton: kinema.Skeleton, foot: int) -> float:
    """Hip-to-knee plus knee-to-foot at the first frame (``world (F, J, 3)``), clip units."""
    knee = int(skeleton.parents[foot])
    hip = int(skeleton.parents[knee])
    return float(np.linalg.norm(world[0, knee] - world[0, hip]) + np.linalg.norm(world[0, foot] - world[0, knee]))


def _horizontal_speed(p: FloatArray, t: FloatArray) -> FloatArray:
    """``(F-1,)`` horizontal (x, z: kinema is Y-up) speed between consecutive frames of ``p (F, 3)``."""
    return np.linalg.norm(np.diff(p[:, [0, 2]], axis=0), axis=-1) / np.diff(t)


def low_and_slow(p: FloatArray, leg: float, t: FloatArray, low: float = LOW_FRACTION,
                 slow: float = SLOW_FRACTION) -> BoolArray:
    """Planted frame pairs ``(F-1,)`` of one foot ``p (F, 3)`` by the own rule (module docstring)."""
    height = p[:, 1] - np.percentile(p[:, 1], FLOOR_PERCENTILE)
    is_low = height <= low * leg
    return is_low[:-1] & is_low[1:] & (_horizontal_speed(p, t) <= slow * leg)


def stances(pairs: BoolArray, t: FloatArray) -> list[tuple[int, int]]:
    """Stances ``[(first frame, last frame)]`` (inclusive) from planted pairs ``(F-1,)``."""
    d = np.diff(np.concatenate(([0], pairs.astype(np.int8), [0])))
    out = []
    for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1), strict=True):
        if t[e] - t[s] >= MIN_STANCE_S:  # pairs s..e-1 join frames s..e
            out.append((int(s), int(e)))
    return out


def skate(p: FloatArray, pairs: BoolArray, t: FloatArray) -> float:
    """Mean horizontal speed of ``p (F, 3)`` over the planted pairs (0 when there is none)."""
    v = _horizontal_speed(p, t)[pairs]
    return float(v.mean()) if v.size else 0.0


def skate_cut(before: FloatArray, after: FloatArray, masks: list[BoolArray], t: FloatArray) -> float:
    """``1 - skate_after / skate_before`` over both feet (``before``/``after`` ``(F, K, 3)``, masks per foot)."""
    b = sum(float(_horizontal_speed(before[:, k], t)[m].sum()) for k, m in enumerate(masks))
    a = sum(float(_horizontal_speed(after[:, k], t)[m].sum()) for k, m in enumerate(masks))
    return 1.0 - a / b if b > 0 else 0.0


def stance_drift(p: FloatArray, spans: list[tuple[int, int]], t: FloatArray) -> float:
    """Largest horizontal spread of ``p (F, 3)`` within one stance: max distance between two of its frames.

    ``STANCE_EDGE_S`` is left out at each end of every stance ``spans``.
    """
    worst = 0.0
    for s, e in spans:
        inner = (t >= t[s] + STANCE_EDGE_S) & (t <= t[e] - STANCE_EDGE_S)
        xz = p[inner][:, [0, 2]]
        if xz.shape[0] < 2:
            continue
        worst = max(worst, float(np.max(np.linalg.norm(xz[:, None] - xz[None], axis=-1))))
    return worst


def speed_ratio(before: kinema.Clip, after: kinema.Clip, joints: list[int]) -> tuple[float, int]:
    """Worst ``max_t w_after / max_t w_before`` over ``joints`` (local angular speed), and that joint."""
    w0 = mocap.angular_speed(before)[:, joints].max(axis=0)
    w1 = mocap.angular_speed(after)[:, joints].max(axis=0)
    ratio = w1 / w0
    k = int(np.argmax(ratio))
    return float(ratio[k]), joints[k]


def measure(capture: Capture, **options: Any) -> dict[str, Any]:
    """Every figure for one capture with kinema's defaults, or with ``options`` for :func:`kinema.mocap.footlock`
    (``keep_length=False``): a dict (lengths in mm, speeds in deg/s)."""
    skeleton, clip = load_capture(capture)
    feet = [skeleton.index(n) for n in capture.feet]
    res = mocap.footlock(skeleton, clip, feet, **options)
    t = mocap.frame_times(clip)
    w_in = kinema.forward_kinematics(skeleton, clip.pose).positions
    w_out = kinema.forward_kinematics(skeleton, res.clip.pose).positions
    legs = [int(skeleton.parents[skeleton.parents[f]]) for f in feet]
    legs = [j for f, h in zip(feet, legs, strict=True) for j in (h, int(skeleton.parents[f]), f)]
    out: dict[str, Any] = {}
    for name, low, slow in RULE_VARIANTS:
        masks = [low_and_slow(w_in[:, f], leg_length(w_in, skeleton, f), t, low, slow) for f in feet]
        out[f"skate cut, {name} rule"] = skate_cut(w_in[:, feet], w_out[:, feet], masks, t)
    out["skate cut, built-in rule"] = float(res.metrics["skate_reduction"])
    drift = 0.0
    for f in feet:
        spans = stances(low_and_slow(w_in[:, f], leg_length(w_in, skeleton, f), t), t)
        drift = max(drift, stance_drift(w_out[:, f], spans, t))
    out["stance drift"] = drift * capture.metres_per_unit * 1000.0
    ratio, joint = speed_ratio(clip, res.clip, legs)
    out["leg angular speed ratio"] = ratio
    out["leg angular speed ratio joint"] = skeleton.names[joint]
    out["locks"] = int(res.metrics["contacts"])
    return out


def measure_all(**options: Any) -> dict[str, dict[str, Any]]:
    return {c.name: measure(c, **options) for c in CAPTURES}


#: ``(figure, threshold, unit, bigger is better)`` for every figure the issue sets a threshold on.
_THRESHOLDS = (
    ("skate cut, own rule", 0.5, "fraction", True),
    ("skate cut, own strict rule", 0.5, "fraction", True),
    ("skate cut, own loose rule", 0.5, "fraction", True),
    ("skate cut, built-in rule", 0.5, "fraction", True),
    ("stance drift", 1.0, "mm", False),
    ("leg angular speed ratio", 1.1, "x input", False),
)


def figures() -> list[dict[str, Any]]:
    """One dict per capture and figure: ``name``, ``landed``, ``now``, ``threshold``, ``unit``.

    ``landed`` is from :data:`LANDED` (None where it was not measured).  Every figure twice: with the
    defaults, and with ``keep_length=False`` (the fixed lock of earlier releases, for reference: the name ends
    in ", keep_length=False" and the threshold is None, no verdict).
    """
    rows = []
    for suffix, options in (("", {}), (", keep_length=False", {"keep_length": False})):
        for capture, now in measure_all(**options).items():
            for figure, threshold, unit, bigger_is_better in _THRESHOLDS:
                # bench_motion's convention: a unit starting with ">=" means the figure must reach the threshold.
                rows.append({"name": f"footlock {figure}: {capture}{suffix}",
                             "landed": LANDED.get(capture, {}).get(figure), "now": now[figure],
                             "threshold": threshold if not suffix else None,
                             "unit": f">= {unit}" if bigger_is_better else unit})
    return rows
