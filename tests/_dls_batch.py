"""A DLS batch against the same items solved one at a time (shared by the stall tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

import kinema


def assert_batch_equals_singles(dls: Any, batch: kinema.Pose, targets: np.ndarray) -> kinema.SolveResult:
    """``dls.solve(batch, [targets])`` equals a loop of single solves bit for bit (rotations, error, iterations and
    each goal's error); returns the batch's result.  ``batch (N, J, k)``, ``targets (N, 3)`` world."""
    res = dls.solve(batch, [targets])
    for i in range(targets.shape[0]):
        one = dls.solve(kinema.Pose(batch.translations[i], batch.rotations[i], batch.scales[i]), [targets[i]])
        np.testing.assert_array_equal(res.pose.rotations[i], one.pose.rotations)
        assert np.array_equal(res.error[i], one.error) and res.iterations[i] == one.iterations
        np.testing.assert_array_equal(res.state["goal_errors"][i], one.state["goal_errors"])
    return res
