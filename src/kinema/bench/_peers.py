"""The suite's optional peers: three.js (node), ikpy, pytorch_kinematics and bvhio.

Each peer is looked up when a row needs it; an absent one gives ``Peer(available=False, reason)``,
never an error.  Installing them: ``pip install "kinema[bench]"`` (ikpy, bvhio, matplotlib),
``pip install pytorch-kinematics`` (it pulls torch, so it is not in the extra), and node with npm
for three.js (three@0.186 is installed by npm into a cache folder on first use).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import rotation
from ..skeleton import Skeleton

__all__ = ["Peer", "import_peer", "threejs_harness", "IkpyChain", "TorchKinematicsChain", "chain_urdf", "SOURCE_ROOT",
           "PK_TOLERANCE", "PK_MAX_ITERATIONS"]

#: The source tree's root (``src/kinema/bench`` -> the repository), where the three.js harness lives.
SOURCE_ROOT = Path(__file__).resolve().parents[3]

#: How to install each peer, for the "not available" rows.
INSTALL_HINT = {
    "ikpy": 'pip install "kinema[bench]"',
    "bvhio": 'pip install "kinema[bench]"',
    "pytorch_kinematics": "pip install pytorch-kinematics (pulls torch)",
    "threejs": "install node and npm; three@0.186 is fetched by npm on first use",
}


@dataclass(frozen=True)
class Peer:
    """Whether a peer can run here: ``available``, and ``reason`` (why not, or its version)."""

    name: str
    available: bool
    reason: str
    module: Any = None


def import_peer(name: str) -> Peer:
    """Import the Python peer ``name`` (``ikpy``, ``bvhio``, ``pytorch_kinematics``) if installed."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return Peer(name, False, f"not installed ({INSTALL_HINT.get(name, 'pip install ' + name)}): {exc}")
    return Peer(name, True, str(getattr(module, "__version__", "installed")), module)


def threejs_harness() -> Peer:
    """The three.js CCDIKSolver harness of the source tree (``tests/_threejs.py``, run under node),
    checked for node, npm and three@0.186; its ``module`` has ``run_ccd``."""
    path = SOURCE_ROOT / "tests" / "_threejs.py"
    if not path.is_file():
        return Peer("threejs", False, "not available: the three.js harness (tests/_threejs.py) ships with the "
                                      "source tree; run kinema bench from a source checkout")
    spec = importlib.util.spec_from_file_location("_kinema_threejs_harness", path)
    if spec is None or spec.loader is None:
        return Peer("threejs", False, f"not available: cannot load {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    ok, why = module.available()
    if not ok:
        return Peer("threejs", False, f"not available ({INSTALL_HINT['threejs']}): {why}")
    return Peer("threejs", True, f"three {why} under node", module)


class IkpyChain:
    """A plain kinema chain (joint k the parent of k+1, root at the origin) as an ikpy ``Chain``:
    each ball joint as three revolute links about x, y and z, the end joint a fixed link."""

    def __init__(self, ikpy: Any, skeleton: Skeleton) -> None:
        from ikpy.chain import Chain
        from ikpy.link import OriginLink, URDFLink

        rpy = rotation.as_euler(skeleton.rotations, "xyz")  # URDF rpy: fixed axes x, y, z
        links: list[Any] = [OriginLink()]
        for k in range(skeleton.n_joints - 1):
            for a, axis in enumerate(np.eye(3)):
                links.append(URDFLink(f"j{k}_{a}", skeleton.translations[k] if a == 0 else np.zeros(3),
                                      rpy[k] if a == 0 else np.zeros(3), rotation=axis))
        links.append(URDFLink("end", skeleton.translations[-1], rpy[-1], joint_type="fixed"))
        mask = [False] + [True] * (len(links) - 2) + [False]
        self.chain = Chain(links, active_links_mask=mask)

    def solve(self, targets_world: NDArray[np.float64]) -> tuple[NDArray[np.float64], list[float]]:
        """``(errors (N,), seconds per solve)``: ikpy's ``inverse_kinematics`` from its zero pose for
        each target, the error measured by ikpy's own forward kinematics."""
        errors = []
        seconds = []
        for tg in targets_world:
            t0 = time.perf_counter()
            q = self.chain.inverse_kinematics(tg)
            seconds.append(time.perf_counter() - t0)
            errors.append(float(np.linalg.norm(self.chain.forward_kinematics(q)[:3, 3] - tg)))
        return np.asarray(errors), seconds


#: pytorch_kinematics's settings for the chain rows: position only, kinema DLS's tolerance and
#: iteration cap, one start (the rest pose), float64.
PK_TOLERANCE = 1e-6
PK_MAX_ITERATIONS = 100


def chain_urdf(skeleton: Skeleton) -> str:
    """A URDF of a plain chain (joint k the parent of k+1): each ball joint as three continuous joints
    about x, y and z, the end joint a fixed one named ``end``.  URDF ``rpy`` is roll, pitch, yaw
    about the fixed axes x, y, z."""
    rpy = rotation.as_euler(skeleton.rotations, "xyz")

    def vec(v: Any) -> str:
        return " ".join(repr(float(x)) for x in v)

    parts = ['<robot name="kinema_chain">', '<link name="base"/>']
    prev = "base"
    for k in range(skeleton.n_joints - 1):
        for a, axis in enumerate(("1 0 0", "0 1 0", "0 0 1")):
            name = f"j{k}_{a}"
            origin = f'xyz="{vec(skeleton.translations[k])}" rpy="{vec(rpy[k])}"' if a == 0 else 'xyz="0 0 0"'
            parts += [f'<link name="{name}"/>',
                      f'<joint name="q{k}_{a}" type="continuous"><parent link="{prev}"/><child link="{name}"/>'
                      f'<origin {origin}/><axis xyz="{axis}"/></joint>']
            prev = name
    parts += ['<link name="end"/>',
              f'<joint name="end_fixed" type="fixed"><parent link="{prev}"/><child link="end"/>'
              f'<origin xyz="{vec(skeleton.translations[-1])}" rpy="{vec(rpy[-1])}"/></joint>', "</robot>"]
    return "\n".join(parts)


class TorchKinematicsChain:
    """A plain kinema chain as a pytorch_kinematics serial chain (:func:`chain_urdf`), solved with its
    batched ``PseudoInverseIK`` (damped least squares on the CPU): position only, tolerance
    :data:`PK_TOLERANCE`, at most :data:`PK_MAX_ITERATIONS` iterations, from the rest pose."""

    def __init__(self, pk: Any, skeleton: Skeleton) -> None:
        import torch

        self._torch = torch
        self._pk = pk
        self.chain = pk.build_serial_chain_from_urdf(chain_urdf(skeleton), "end").to(dtype=torch.float64)
        dof = len(self.chain.get_joint_parameter_names())
        self.solver = pk.PseudoInverseIK(
            self.chain, retry_configs=torch.zeros(1, dof, dtype=torch.float64), orientation_weight=0.0,
            pos_tolerance=PK_TOLERANCE, rot_tolerance=float("inf"), max_iterations=PK_MAX_ITERATIONS,
            enforce_joint_limits=False, early_stopping_any_converged=True)

    def solve(self, targets_world: NDArray[np.float64]) -> NDArray[np.float64]:
        """``errors (N,)`` of one batched solve, measured by pytorch_kinematics's own FK."""
        torch = self._torch
        goal = self._pk.Transform3d(pos=torch.as_tensor(targets_world), dtype=torch.float64)
        q = self.solver.solve(goal).solutions[:, 0]
        end = self.chain.forward_kinematics(q).get_matrix()[:, :3, 3].numpy()
        return np.asarray(np.linalg.norm(end - targets_world, axis=-1))
