"""kinema: batch-first inverse kinematics for characters, creatures and rigs.

Quaternions are xyzw everywhere.  Poses carry leading batch dimensions
``(*batch, J, ...)``; one call solves one character or a million.

``import kinema`` is cheap: numba and the kernels load on the first call
that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import filters, goals, hands, limits, rotation
from ._ccd import CCD, Goal, solve_ccd, solve_chains
from ._dls import DLS, solve_dls
from ._fabrik import FABRIK, FABRIKTree, solve_fabrik, solve_fabrik_tree
from ._two_bone import TwoBone, TwoBone2D, TwoBoneIK, solve_two_bone, solve_two_bone_2d
from .errors import (
    BatchIndexError,
    BoneNotFoundError,
    FileFormatError,
    KinemaError,
    ShapeError,
    SkeletonError,
    SolverInputError,
)
from .fk import FKResult, forward_kinematics, world_to_local
from .goals import LookAtGoal, OrientationGoal, PoseGoal, PositionGoal
from .pose import Clip, Pose
from .result import SolveResult
from .rig import Rig, RigResult, Step
from .skeleton import Skeleton

if TYPE_CHECKING:  # lazy at run time, see __getattr__
    from . import io, mocap, samples

__version__ = "0.1.0"

#: Submodules imported on first attribute access (PEP 562), keeping ``import kinema`` light.
_LAZY_SUBMODULES = ("io", "samples", "mocap")


def __getattr__(name: str) -> object:
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kinema' has no attribute {name!r}")

__all__ = [
    "__version__",
    "rotation",
    "limits",
    "goals",
    "filters",
    "hands",
    "io",
    "samples",
    "mocap",
    "TwoBone",
    "CCD",
    "FABRIK",
    "FABRIKTree",
    "solve_ccd",
    "solve_chains",
    "Goal",
    "solve_fabrik",
    "solve_fabrik_tree",
    "solve_dls",
    "DLS",
    "PositionGoal",
    "OrientationGoal",
    "LookAtGoal",
    "PoseGoal",
    "Skeleton",
    "Pose",
    "Clip",
    "FKResult",
    "forward_kinematics",
    "world_to_local",
    "SolveResult",
    "Rig",
    "Step",
    "RigResult",
    "KinemaError",
    "SkeletonError",
    "BoneNotFoundError",
    "ShapeError",
    "BatchIndexError",
    "FileFormatError",
    "SolverInputError",
    "solve_two_bone",
    "solve_two_bone_2d",
    "TwoBoneIK",
    "TwoBone2D",
]
