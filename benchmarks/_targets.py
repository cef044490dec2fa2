"""Shared benchmark inputs for the chain solvers (CCD, FABRIK, DLS): the 10-bone chain and reachable targets.

They are built by :mod:`kinema._problems` (one module for the benchmarks, ``kinema bench`` and the
tests); this file keeps the names the benchmark scripts import.
"""

from __future__ import annotations

from kinema._problems import CHAIN_BONES as N_BONES
from kinema._problems import CHAIN_TARGETS as N_TARGETS
from kinema._problems import chain_rig, reachable_targets

__all__ = ["chain_rig", "reachable_targets", "N_BONES", "N_TARGETS"]
