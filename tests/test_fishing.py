"""The fishing session played headless through every state: arms, palms, fingers, net, drawing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import kinema
from kinema import rotation as rot
from kinema.demos import fishing
from kinema.demos.fishing import DEMO, STATES, FishingSession

FPS = 30
#: One whole session at FPS (every state once) and a few frames into the next one.
SESSION_S = sum(p.duration for phases in fishing.TIMELINE.values() for p in phases)
FRAMES = int(math.ceil(SESSION_S * FPS)) + 5


@dataclass
class Frame:
    state: str
    pose: kinema.Pose
    targets: dict[str, np.ndarray]
    grips: dict[str, fishing.Grip]
    net_holder: str
    net_grip: np.ndarray
    net_direction: np.ndarray
    drawing: object


@pytest.fixture(scope="module")
def played() -> tuple[FishingSession, list[Frame]]:
    session = FishingSession(seed=0)
    assert session.auto
    frames = []
    for _ in range(FRAMES):
        session.step(1.0 / FPS)
        frames.append(Frame(session.state, session.pose.copy(), dict(session.wrist_targets), dict(session.grips),
                            session.net_holder, session.net_grip.copy(), session.net_direction.copy(),
                            session.drawing()))
    return session, frames


def _joint(session: FishingSession, name: str) -> int:
    return session.skeleton.index(name)


def test_every_state_plays_in_order_and_loops(played):
    _, frames = played
    order = [frames[0].state]
    for f in frames[1:]:
        if f.state != order[-1]:
            order.append(f.state)
    assert order == [*STATES, "idle"]


def test_hands_on_their_grips_whenever_reachable(played):
    session, frames = played
    sk = session.skeleton
    reachable_frames = 0
    for f in frames:
        fk = kinema.forward_kinematics(sk, f.pose)
        for side in ("left", "right"):
            shoulder, elbow, wrist = (fk.positions[_joint(session, f"{side}_{j}")] for j in ("shoulder", "elbow",
                                                                                            "wrist"))
            a = np.linalg.norm(elbow - shoulder)
            b = np.linalg.norm(wrist - elbow)
            d = np.linalg.norm(f.targets[side] - shoulder)
            if abs(a - b) <= d <= a + b:
                reachable_frames += 1
                assert np.linalg.norm(wrist - f.targets[side]) <= 1e-3, (f.state, side)
                # The palm faces the grip: its basis is the grip's, its centre lies on the held cylinder.
                hand = session.hands[side]
                w_rot = fk.rotations[hand.wrist]
                np.testing.assert_allclose(rot.as_matrix(w_rot) @ hand.palm_basis, f.grips[side].basis, atol=1e-9)
                palm = wrist + rot.rotate(w_rot, hand.palm_center)
                rel = palm - f.grips[side].axis_point
                off_axis = rel - (rel @ f.grips[side].axis_direction) * f.grips[side].axis_direction
                assert abs(np.linalg.norm(off_axis) - f.grips[side].radius) <= 1e-3
    assert reachable_frames >= 0.9 * 2 * len(frames)


def test_no_elbow_flips(played):
    session, frames = played
    for side in ("left", "right"):
        dirs = []
        for f in frames:
            p = kinema.forward_kinematics(session.skeleton, f.pose).positions
            upper = p[_joint(session, f"{side}_elbow")] - p[_joint(session, f"{side}_shoulder")]
            dirs.append(upper / np.linalg.norm(upper))
        d = np.array(dirs)
        change = np.arccos(np.clip(np.sum(d[1:] * d[:-1], axis=1), -1.0, 1.0))
        assert np.median(change) > 0.0
        assert change.max() <= 5.0 * np.median(change), (side, change.max(), np.median(change))


def test_bone_lengths_are_kept(played):
    session, frames = played
    rest = session.skeleton.bone_lengths()
    has = session.skeleton.parents >= 0
    for f in frames:
        lengths = session.skeleton.bone_lengths(f.pose)
        np.testing.assert_allclose(lengths[has], rest[has], rtol=1e-9, atol=0)


def test_fingers_within_limits_and_touching_what_they_hold(played):
    session, frames = played
    sk = session.skeleton
    for f in frames:
        positions = kinema.forward_kinematics(sk, f.pose).positions
        for side in ("left", "right"):
            hand = session.hands[side]
            grip = f.grips[side]
            # Gripping: the wrist on its target and the hand closed on the axis (not between two holds).
            on_grip = np.linalg.norm(positions[hand.wrist] - f.targets[side]) <= 1e-3 and grip.openness == 0.0
            for finger in hand.fingers:
                for j, lim in zip(finger.joints, finger.limits, strict=True):
                    assert float(lim.violation(f.pose.rotations[j], sk.rotations[j])) <= 1e-12
                if on_grip:
                    chain = positions[[*finger.joints, finger.tip]] - grip.axis_point
                    perp = chain - np.outer(chain @ grip.axis_direction, grip.axis_direction)
                    ts = np.linspace(0.0, 1.0, 501)[:, None]
                    gap = min(np.linalg.norm(p0 + ts * (p1 - p0), axis=1).min()
                              for p0, p1 in zip(perp[:-1], perp[1:], strict=True)) - grip.radius
                    assert abs(gap) <= 2e-3, (f.state, side, finger.name, gap)


def test_hands_open_between_holds(played):
    """While the left hand travels (rod -> reel -> net -> rod) its fingers open and close again smoothly."""
    session, frames = played
    openness = np.array([f.grips["left"].openness for f in frames])
    assert openness.max() > 0.99 and (openness == 0.0).mean() > 0.3
    index = session.hands["left"].finger("index").joints[1]
    angles = [2.0 * np.arccos(min(1.0, abs(float(f.pose.rotations[index, 3])))) for f in frames]
    assert np.max(np.abs(np.diff(angles))) < np.radians(10.0)  # never a snap of the fingers


def test_the_net_changes_hands_exactly_at_land(played):
    session, frames = played
    for before, after in zip(frames[:-1], frames[1:], strict=True):
        if before.net_holder != after.net_holder:
            entering = (before.net_holder, after.net_holder, after.state)
            assert entering in (("deck", "left", "land"), ("left", "deck", "idle"))
            assert before.state != after.state
    holders = {f.state: set() for f in frames}
    for f in frames:
        holders[f.state].add(f.net_holder)
    assert holders["land"] == {"left"} and holders["wait"] == {"deck"}
    # While in the left hand, the left grip is on the net's pole.
    for f in frames:
        if f.net_holder == "left":
            np.testing.assert_allclose(f.grips["left"].axis_point, f.net_grip, atol=1e-12)
            np.testing.assert_allclose(f.grips["left"].axis_direction, f.net_direction, atol=1e-12)


def test_drawing_is_finite_every_frame(played):
    _, frames = played
    for f in frames:
        d = f.drawing
        assert len(d.lines) > 10 and len(d.dots) > 10
        for ln in d.lines:
            assert ln.points_world.shape[0] >= 2 and np.all(np.isfinite(ln.points_world))
        for dot in d.dots:
            assert np.all(np.isfinite(dot.position_world)) and dot.radius > 0.0
        lo, hi = d.bounds()
        assert np.all(np.isfinite(lo)) and np.all(hi > lo)
        assert f.state in d.caption


def test_configured_offsets_are_not_written(played):
    assert not fishing.ELBOW_POLE_LOCAL["right"].flags.writeable
    np.testing.assert_array_equal(fishing.ELBOW_POLE_LOCAL["left"], [-0.25, 0.05, -0.65])
    np.testing.assert_array_equal(fishing.NET_REST_GRIP_LOCAL, [0.22, 0.23, -0.25])


def test_manual_stepping_options_and_descriptor():
    assert DEMO["name"] == "fishing" and DEMO["make"] is FishingSession and DEMO["fps"] == 30
    # The frames the camera is fitted on (idle, cast, wait) span a world box holding every later frame.
    fit = FishingSession(seed=0)
    fitted = []
    for _ in range(int(DEMO["fit_seconds"] * FPS)):
        fit.step(1.0 / FPS)
        fitted.append(fit.drawing().bounds())
    lo = np.min([b[0] for b in fitted], axis=0)
    hi = np.max([b[1] for b in fitted], axis=0)
    for _ in range(int((SESSION_S - DEMO["fit_seconds"]) * FPS)):
        fit.step(1.0 / FPS)
        f_lo, f_hi = fit.drawing().bounds()
        assert np.all(f_lo >= lo - 1e-9) and np.all(f_hi <= hi + 1e-9), fit.state
    session = FishingSession(seed=1)
    session.auto = False
    for _ in range(int(10 * FPS)):  # far past idle's duration: it stays
        session.step(1.0 / FPS)
    assert session.state == "idle"
    seen = []
    for _ in range(len(STATES)):
        session.advance_state()
        seen.append(session.state)
    assert seen == [*STATES[1:], "idle"]
    plain = session.drawing()
    session.options.poles = session.options.grips = session.options.reach = True
    full = session.drawing()
    labels = {d.label for d in full.dots} | {ln.label for ln in full.lines}
    assert {"left pole", "right grip", "left reach", "right elbow pole"} <= labels
    assert len(full.dots) == len(plain.dots) + 6
    assert "reach:" in full.caption
    with pytest.raises(kinema.SolverInputError, match="dt"):
        session.step(float("nan"))
    with pytest.raises(kinema.SolverInputError, match="dt"):
        session.step(-0.1)
    with pytest.raises(kinema.SolverInputError, match="dt"):
        session.step("fast")  # type: ignore[arg-type]
    with pytest.raises(kinema.SolverInputError, match="seed"):
        FishingSession(seed=-1)


def test_grips_are_configured_in_the_actors_frame():
    """Turning the angler on the jetty turns everything it holds with it: every local rotation below the
    root (arms, palms, fingers) comes out the same, and the wrist targets are the turned ones."""
    straight = FishingSession(seed=0)
    turned = FishingSession(seed=0, actor_yaw_deg=30.0)
    yaw = rot.from_axis_angle([0.0, 1.0, 0.0], 30.0, degrees=True)
    for _ in range(int(12 * FPS)):  # through cast, wait, strike and into the fight (the reel)
        straight.step(1.0 / FPS)
        turned.step(1.0 / FPS)
        np.testing.assert_allclose(rot.canonical(turned.pose.rotations[1:]),
                                   rot.canonical(straight.pose.rotations[1:]), rtol=0, atol=1e-9)
        for side in ("left", "right"):
            expected = fishing.ACTOR_POSITION + rot.rotate(yaw, straight.wrist_targets[side] - fishing.ACTOR_POSITION)
            np.testing.assert_allclose(turned.wrist_targets[side], expected, rtol=0, atol=1e-9)
    assert straight.state == "fight"
    with pytest.raises(kinema.SolverInputError, match="actor_yaw_deg"):
        FishingSession(actor_yaw_deg=90.0)


def test_an_unreachable_grip_is_clamped_on_the_line_to_it(monkeypatch):
    """A rear grip far behind the hand's reach: the arm stretches towards it (no NaN, no snap) and the
    reach state says so."""
    monkeypatch.setattr(fishing, "REAR_GRIP_ALONG", -1.0)
    session = FishingSession(seed=0)
    session.options.reach = True
    sk = session.skeleton
    shoulder_j, elbow_j, wrist_j = (sk.index(f"left_{j}") for j in ("shoulder", "elbow", "wrist"))
    a, b = (float(sk.bone_lengths()[j]) for j in (elbow_j, wrist_j))
    clamped = 0
    for _ in range(int(2.5 * FPS)):  # the rest of idle, once the hand is back from the net
        session.step(1.0 / FPS)
        if session.state_time < fishing.HAND_TRANSFER_S:
            continue
        p = kinema.forward_kinematics(sk, session.pose).positions
        to_target = session.wrist_targets["left"] - p[shoulder_j]
        to_wrist = p[wrist_j] - p[shoulder_j]
        assert np.linalg.norm(to_target) > a + b
        assert not session.reached["left"]
        assert a + b - 1e-3 <= np.linalg.norm(to_wrist) <= a + b
        cross = np.cross(to_target / np.linalg.norm(to_target), to_wrist / np.linalg.norm(to_wrist))
        assert np.linalg.norm(cross) <= 1e-9  # on the shoulder-target line
        assert "left clamped" in session.drawing().caption
        clamped += 1
    assert clamped > 10


def test_rod_tip_bends_towards_the_line_and_the_line_sags():
    start = np.array([0.0, 1.0, 0.0])
    direction = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0)
    pull = np.array([1.0, -1.0, 0.0]) / np.sqrt(2.0)
    straight = fishing.bent_blank(start, direction, pull, 0.0)
    bent = fishing.bent_blank(start, direction, pull, 1.0)
    seg = fishing.ROD_TIP_LENGTH / fishing.ROD_TIP_SEGMENTS
    for blank in (straight, bent):
        np.testing.assert_allclose(np.linalg.norm(np.diff(blank, axis=0), axis=1), seg, rtol=1e-12)
    np.testing.assert_allclose(straight[-1], start + fishing.ROD_TIP_LENGTH * direction, atol=1e-12)
    dirs = np.diff(bent, axis=0) / seg
    from_rod = np.arccos(np.clip(dirs @ direction, -1.0, 1.0))
    assert np.all(np.diff(from_rod) > 0.0)  # each segment turned further than the one before it
    assert np.isclose(from_rod[-1], fishing.ROD_MAX_BEND, atol=1e-9)  # full load: the tip's full bend
    np.testing.assert_allclose(np.cross(dirs, direction) @ np.cross(pull, direction) / np.linalg.norm(
        np.cross(pull, direction)), np.linalg.norm(np.cross(dirs, direction), axis=1), atol=1e-12)  # towards the pull
    hard = fishing.bent_blank(start, direction, np.array([1.0, 0.9, 0.0]) / np.linalg.norm([1.0, 0.9, 0.0]), 1.0)
    np.testing.assert_allclose(np.diff(hard, axis=0)[-1] / seg, np.array([1.0, 0.9, 0.0]) / np.linalg.norm([1, 0.9, 0]),
                               atol=1e-12)  # a pull close to the rod: the tip lines up with it and stops
    a, b = np.zeros(3), np.array([4.0, -1.0, 0.0])
    line = fishing.sagging_line(a, b, 0.3, n=25)
    np.testing.assert_allclose(line[[0, -1]], [a, b], atol=1e-12)
    np.testing.assert_allclose(line[12], (a + b) / 2 - [0.0, 0.3, 0.0], atol=1e-12)
