"""kinema.hands.curl: the result has the broadcast batch of pose, amount and spread."""

from __future__ import annotations

import numpy as np
import pytest

from kinema import hands
from kinema.errors import ShapeError
from kinema.samples import humanoid

SKELETON = humanoid(hands=True)
RIGHT = hands.Hand.from_skeleton(SKELETON, "right")
N_F = len(RIGHT.fingers)


@pytest.mark.parametrize(("pose_batch", "amount_shape", "spread_shape", "batch"), [
    ((), (), (2, N_F), (2,)),
    ((), (N_F,), (2, N_F), (2,)),
    ((), (2, N_F), (N_F,), (2,)),
    ((), (3, 1, N_F), (2, N_F), (3, 2)),
    ((2,), (), (3, 1, N_F), (3, 2)),
    ((4, 1), (3, N_F), (), (4, 3)),
    ((2,), (1, N_F), (2, 1, N_F), (2, 2)),
])
def test_curl_broadcasts_pose_amount_and_spread(pose_batch: tuple[int, ...], amount_shape: tuple[int, ...],
                                                spread_shape: tuple[int, ...], batch: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    pose = SKELETON.rest_pose(pose_batch) if pose_batch else SKELETON.rest_pose()
    amount = rng.uniform(0.0, 1.0, amount_shape) if amount_shape else 0.4
    spread = rng.uniform(-1.0, 1.0, spread_shape) if spread_shape else 0.3
    got = hands.curl(pose, RIGHT, amount, spread=spread)
    assert got.rotations.shape == batch + (SKELETON.n_joints, 4)
    # Each item is the unbatched curl of its own amount and spread.
    a_full = np.broadcast_to(amount if np.ndim(amount) else np.full(N_F, amount), batch + (N_F,))
    s_full = np.broadcast_to(spread if np.ndim(spread) else np.full(N_F, spread), batch + (N_F,))
    for i in np.ndindex(*batch):
        one = hands.curl(SKELETON.rest_pose(), RIGHT, a_full[i], spread=s_full[i])
        np.testing.assert_allclose(got.rotations[i], one.rotations, atol=1e-15)


def test_curl_into_out_of_the_broadcast_batch() -> None:
    pose = SKELETON.rest_pose()
    out = SKELETON.rest_pose((2,))
    res = hands.curl(pose, RIGHT, 0.5, spread=np.zeros((2, N_F)), out=out)
    assert res is out
    np.testing.assert_array_equal(out.rotations[0], hands.curl(pose, RIGHT, 0.5).rotations)


@pytest.mark.parametrize(("pose_batch", "amount_shape", "spread_shape"), [
    ((), (3, N_F), (2, N_F)),
    ((3,), (), (2, N_F)),
    ((3,), (2, N_F), ()),
    ((2, 3), (2, N_F), (3, N_F)),
])
def test_curl_batches_that_do_not_broadcast_name_the_arguments(pose_batch: tuple[int, ...],
                                                               amount_shape: tuple[int, ...],
                                                               spread_shape: tuple[int, ...]) -> None:
    pose = SKELETON.rest_pose(pose_batch) if pose_batch else SKELETON.rest_pose()
    amount = np.full(amount_shape, 0.5) if amount_shape else 0.5
    spread = np.zeros(spread_shape) if spread_shape else 0.0
    with pytest.raises(ShapeError, match=r"pose, amount and spread batch") as info:
        hands.curl(pose, RIGHT, amount, spread=spread)
    msg = str(info.value)
    assert f"pose {pose_batch}" in msg and "amount" in msg and "spread" in msg
