"""Iterating a batched Pose yields the items of its first batch dimension and stops.

``list(pose)`` on a batch of 3 raised a ShapeError after the third item: Python's sequence protocol stops on an
IndexError, and an index past the end raised a ShapeError (a ValueError) only.  It now raises
:class:`kinema.BatchIndexError`, a ShapeError and an IndexError.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import rotation as R

SK = kinema.samples.humanoid()


@pytest.mark.parametrize("batch", [(3,), (2, 4), (1,), (0,)])
def test_iterating_a_pose_yields_its_first_batch_dimension(batch: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    pose = SK.rest_pose(batch)
    pose.rotations[...] = R.from_rotvec(rng.normal(size=batch + (SK.n_joints, 3)))
    items = list(pose)
    assert len(items) == batch[0]
    for i, item in enumerate(items):
        assert item.batch_shape == batch[1:]
        np.testing.assert_array_equal(item.rotations, pose[i].rotations)
        np.testing.assert_array_equal(item.translations, pose[i].translations)
    assert [tuple(it.batch_shape) for it in pose] == [batch[1:]] * batch[0]


@pytest.mark.parametrize("index", [3, -4, 2**63, np.int64(7)])
def test_an_integer_past_the_end_is_a_batch_index_error(index: object) -> None:
    pose = SK.rest_pose((3,))
    with pytest.raises(kinema.BatchIndexError, match=r"pose index: expected shape an index into the batch "
                                                      r"dimensions \(3,\)") as info:
        pose[index]
    assert isinstance(info.value, kinema.ShapeError) and isinstance(info.value, IndexError)


@pytest.mark.parametrize("pose, index", [(SK.rest_pose(), 0), (SK.rest_pose((3,)), "a"), (SK.rest_pose((3,)), 1.0),
                                         (SK.rest_pose((3,)), (0, 0))])
def test_other_bad_indices_stay_shape_errors_only(pose: kinema.Pose, index: object) -> None:
    """An unbatched pose is not a sequence of items, and a non-integer is no position: ShapeError, not IndexError
    (so ``list(unbatched_pose)`` raises instead of giving an empty list)."""
    with pytest.raises(kinema.ShapeError) as info:
        pose[index]  # type: ignore[index]
    assert not isinstance(info.value, IndexError)
    if pose.batch_shape == ():
        with pytest.raises(kinema.ShapeError):
            list(pose)
