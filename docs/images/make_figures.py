"""Draw the documentation's solver and limit figures from real solves: ``python docs/images/make_figures.py``.

Writes ``two_bone.png``, ``ccd.png``, ``fabrik.png``, ``dls.png`` and ``limits.png`` beside this file (needs Pillow,
in the ``test`` extra).  Every line and point drawn is a solver's output or a limit's clamp, projected on a
plane; nothing is sketched by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

import kinema
from kinema import rotation
from kinema.limits import EulerRange, Hinge, SwingTwist

#: Figure size in pixels, and the margin around the drawn data.
SIZE = (640, 420)
MARGIN = 40
GREY = (170, 170, 170)
BLUE = (30, 100, 200)
RED = (210, 40, 40)
GREEN = (40, 150, 70)
BLACK = (20, 20, 20)


class Canvas:
    """A white image with a world-to-pixel map fitted to a 2D bounding box (y up)."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, size: tuple[int, int] = SIZE) -> None:
        self.image = Image.new("RGB", size, "white")
        self.draw = ImageDraw.Draw(self.image)
        span = np.maximum(hi - lo, 1e-9)
        self.scale = min((size[0] - 2 * MARGIN) / span[0], (size[1] - 2 * MARGIN) / span[1])
        self.origin = lo
        self.offset = (np.array(size) - self.scale * span) / 2

    def px(self, p: np.ndarray) -> tuple[float, float]:
        x, y = (np.asarray(p[:2]) - self.origin) * self.scale + self.offset
        return float(x), float(self.image.height - y)

    def chain(self, points: np.ndarray, colour: tuple[int, int, int], width: int = 4) -> None:
        pts = [self.px(p) for p in points]
        self.draw.line(pts, fill=colour, width=width, joint="curve")
        for x, y in pts:
            self.draw.ellipse((x - 5, y - 5, x + 5, y + 5), fill=colour)

    def cross(self, p: np.ndarray, colour: tuple[int, int, int], r: float = 9) -> None:
        x, y = self.px(p)
        self.draw.line((x - r, y - r, x + r, y + r), fill=colour, width=3)
        self.draw.line((x - r, y + r, x + r, y - r), fill=colour, width=3)

    def dot(self, p: np.ndarray, colour: tuple[int, int, int], r: float = 2.5) -> None:
        x, y = self.px(p)
        self.draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)

    def text(self, p: np.ndarray, words: str, colour: tuple[int, int, int] = BLACK) -> None:
        self.draw.text(self.px(p), words, fill=colour)


def _fit(*point_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pts = np.concatenate([np.asarray(p)[..., :2].reshape(-1, 2) for p in point_sets])
    return pts.min(axis=0), pts.max(axis=0)


def two_bone(out: Path) -> None:
    """The humanoid's right arm seen from its right side (x forward, y up): rest, solved, target, pole."""
    skeleton = kinema.samples.humanoid()
    pose = skeleton.rest_pose()
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    idx = [skeleton.index(j) for j in arm]
    rest_world = kinema.forward_kinematics(skeleton, pose).positions
    shoulder = rest_world[idx[0]]
    target = shoulder + [0.32, 0.05, 0.0]
    pole = shoulder + [0.1, -0.45, 0.0]
    solved = kinema.solve_two_bone(skeleton, pose, arm, target, pole=pole).pose
    solved_world = kinema.forward_kinematics(skeleton, solved).positions
    c = Canvas(*_fit(rest_world[idx], solved_world[idx], target[None], pole[None]))
    c.chain(rest_world[idx], GREY)
    c.chain(solved_world[idx], BLUE)
    c.cross(target, RED)
    c.cross(pole, GREEN)
    c.text(target + [0.01, 0.02, 0], "target", RED)
    c.text(pole + [0.02, 0.0, 0], "pole", GREEN)
    c.text(rest_world[idx[2]] + [0.02, 0.0, 0], "rest", GREY)
    c.text(solved_world[idx[1]] + [0.02, -0.03, 0], "solved: elbow toward the pole", BLUE)
    c.image.save(out)


def _line_skeleton(n: int, step: tuple[float, float, float]) -> kinema.Skeleton:
    names = [f"j{k}" for k in range(n)]
    return kinema.Skeleton(names, [-1] + list(range(n - 1)), [[0.0, 0.0, 0.0]] + [list(step)] * (n - 1))


def ccd(out: Path) -> None:
    """A ten-bone tentacle after 1 CCD sweep (pale) and after 30 (dark), toward a target."""
    skeleton = _line_skeleton(11, (0.0, 0.1, 0.0))
    pose = skeleton.rest_pose()
    target = np.array([0.55, 0.45, 0.0])
    rest_world = kinema.forward_kinematics(skeleton, pose).positions
    stages = []
    for sweeps in (1, 30):
        res = kinema.solve_ccd(skeleton, pose, ("j0", "j10"), target, iterations=sweeps, tolerance=0.0)
        stages.append(kinema.forward_kinematics(skeleton, res.pose).positions)
    c = Canvas(*_fit(rest_world, target[None], *stages))
    c.chain(rest_world, GREY, width=3)
    c.chain(stages[0], (160, 180, 240), width=3)
    c.chain(stages[1], BLUE, width=3)
    c.cross(target, RED)
    c.text(target + [0.02, 0.02, 0], "target", RED)
    c.text(np.array([0.42, 0.12, 0.0]), "pale: after 1 sweep", (120, 140, 220))
    c.text(np.array([0.22, 0.5, 0.0]), "dark: after 30 sweeps", BLUE)
    c.image.save(out)


def fabrik(out: Path) -> None:
    """A 1 m rope reaching the same target with FABRIK, without and with a pole above it."""
    skeleton = _line_skeleton(9, (0.125, 0.0, 0.0))
    pose = skeleton.rest_pose()
    target = np.array([0.45, 0.35, 0.0])
    pole = np.array([0.0, 1.0, 0.0])
    rest_world = kinema.forward_kinematics(skeleton, pose).positions
    plain = kinema.solve_fabrik(skeleton, pose, ("j0", "j8"), target, tolerance=1e-6, iterations=50)
    poled = kinema.solve_fabrik(skeleton, pose, ("j0", "j8"), target, tolerance=1e-6, iterations=50, pole=pole)
    plain_world = kinema.forward_kinematics(skeleton, plain.pose).positions
    poled_world = kinema.forward_kinematics(skeleton, poled.pose).positions
    c = Canvas(*_fit(rest_world, plain_world, poled_world, pole[None]))
    c.chain(rest_world, GREY, width=3)
    c.chain(plain_world, BLUE, width=3)
    c.chain(poled_world, GREEN, width=3)
    c.cross(target, RED)
    c.cross(pole, GREEN)
    c.text(pole + [0.02, 0.0, 0], "pole", GREEN)
    c.text(target + [0.02, 0.02, 0], "target", RED)
    c.image.save(out)


def _stick_figure(c: Canvas, skeleton: kinema.Skeleton, world: np.ndarray, colour: tuple[int, int, int]) -> None:
    for j, parent in enumerate(skeleton.parents):
        if parent >= 0:
            c.chain(world[[parent, j]], colour, width=3)


def dls(out: Path) -> None:
    """The humanoid seen from its right (x forward, y up): a walk frame (grey) and the DLS solve (blue)
    with both feet pinned (priority 1), both hands reaching forward and up, the pose goal keeping the rest."""
    from kinema import PoseGoal, PositionGoal

    skeleton = kinema.samples.humanoid()
    pose = kinema.samples.clip("walk").pose[0]
    world = kinema.forward_kinematics(skeleton, pose).positions
    ix = skeleton.index
    hands = [world[ix("left_wrist")] + [0.25, 0.1, 0.05], world[ix("right_wrist")] + [0.25, 0.1, -0.05]]
    goals = [PositionGoal("left_ankle", world[ix("left_ankle")], priority=1),
             PositionGoal("right_ankle", world[ix("right_ankle")], priority=1),
             PositionGoal("left_wrist", hands[0]), PositionGoal("right_wrist", hands[1]), PoseGoal(weight=0.1)]
    solved = kinema.DLS(skeleton, goals, root_translation=True).solve(pose).pose
    solved_world = kinema.forward_kinematics(skeleton, solved).positions
    c = Canvas(*_fit(world, solved_world, np.array(hands)))
    _stick_figure(c, skeleton, world, GREY)
    _stick_figure(c, skeleton, solved_world, BLUE)
    for p in (*hands, world[ix("left_ankle")], world[ix("right_ankle")]):
        c.cross(p, RED)
    c.text(hands[1] + [0.03, 0.02, 0.0], "hand targets", RED)
    c.text(world[ix("right_ankle")] + [0.05, -0.02, 0.0], "feet pinned (priority 1)", RED)
    c.image.save(out)


def limits(out: Path) -> None:
    """Random rotations clamped by each limit, drawn in the limit's own coordinates (black: the range).

    Left, Hinge: the clamped angle about the axis (points on the unit circle; the wedge is the range).
    Middle, SwingTwist: the clamped swing vector (theta n1, theta n2), radians, filling the ellipse.
    Right, EulerRange: the clamped first two Euler angles, radians, filling the box.
    """
    rng = np.random.default_rng(0)
    q = rotation.normalize(rng.normal(size=(1500, 4)))
    width, height = SIZE[0] * 3 // 2, SIZE[1]
    sheet = Image.new("RGB", (width, height), "white")
    panel = (width // 3, height)

    hinge = Hinge((0, 0, 1), -30, 120, degrees=True)
    _, angle = rotation.as_axis_angle(rotation.swing_twist(hinge.clamp(q), (0, 0, 1))[1])
    axis, _ = rotation.as_axis_angle(rotation.swing_twist(hinge.clamp(q), (0, 0, 1))[1])
    signed = np.where(axis[:, 2] >= 0, angle, -angle)
    c = Canvas(np.array([-1.2, -1.2]), np.array([1.2, 1.2]), panel)
    c.draw.pieslice((*c.px(np.array([-1.0, 1.0])), *c.px(np.array([1.0, -1.0]))), start=-120, end=30,
                    outline=BLACK, width=2)
    for a in signed:
        c.dot(np.array([np.cos(a), np.sin(a)]), BLUE, 3)
    c.text(np.array([-1.15, -1.15]), "Hinge((0,0,1), -30, 120 deg)")
    sheet.paste(c.image, (0, 0))

    cone = SwingTwist((0, 0, 1), swing=(40, 70), reference=(1, 0, 0), degrees=True)
    clamped = cone.clamp(q)
    swing, _ = rotation.swing_twist(clamped, (0, 0, 1))
    vec = rotation.as_rotvec(swing)
    s1, s2 = cone.swing_limits
    c = Canvas(np.array([-1.4, -1.4]), np.array([1.4, 1.4]), panel)
    c.draw.ellipse((*c.px(np.array([-s1, s2])), *c.px(np.array([s1, -s2]))), outline=BLACK, width=2)
    for v in vec:
        c.dot(v[:2], BLUE)
    c.text(np.array([-1.35, -1.35]), "SwingTwist swing=(40, 70 deg)")
    sheet.paste(c.image, (panel[0], 0))

    box = EulerRange("XYZ", mins=(-60, -30, -20), maxs=(80, 45, 20), degrees=True)
    angles = rotation.as_euler(box.clamp(q), "XYZ")
    c = Canvas(np.array([-1.7, -1.7]), np.array([1.7, 1.7]), panel)
    lo, hi = np.radians([-60, -30]), np.radians([80, 45])
    c.draw.rectangle((*c.px(np.array([lo[0], hi[1]])), *c.px(np.array([hi[0], lo[1]]))), outline=BLACK, width=2)
    for a in angles:
        c.dot(a[:2], BLUE)
    c.text(np.array([-1.65, -1.65]), "EulerRange XYZ: X and Y")
    sheet.paste(c.image, (2 * panel[0], 0))
    sheet.save(out)


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else Path(__file__).resolve().parent
    two_bone(folder / "two_bone.png")
    ccd(folder / "ccd.png")
    fabrik(folder / "fabrik.png")
    dls(folder / "dls.png")
    limits(folder / "limits.png")


if __name__ == "__main__":
    main(sys.argv[1:])
