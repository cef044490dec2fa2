"""Skeleton inputs of the wrong kind: 0-d arrays as joint lists, duplicate and unordered names, bools among numbers.

``sk.indices(np.array(3))`` was a bare TypeError; ``from_unordered`` reported a duplicate name as a parent
cycle (and an unhashable name as a TypeError); names given as a set were taken in hash order; ``True`` in a
list of numbers was read as 1.0 (NumPy turns ``[True, 0, 0]`` into ints), by the shared conversion every
array input goes through.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import BoneNotFoundError, KinemaError, ShapeError, Skeleton, SkeletonError, SolverInputError

SK = kinema.samples.humanoid()


@pytest.mark.parametrize("joints", [np.array(3), np.array("chest"), np.int64(3), 5, "chest"])
def test_one_joint_where_indices_wants_several_is_a_bone_not_found_error(joints: object) -> None:
    with pytest.raises(BoneNotFoundError, match="indices takes a sequence of joint names or indices"):
        SK.indices(joints)  # type: ignore[arg-type]


def test_indices_of_sequences_and_arrays_still_work() -> None:
    np.testing.assert_array_equal(SK.indices(np.array([3, 1])), [3, 1])
    np.testing.assert_array_equal(SK.indices(["chest", np.int64(0)]), [1, 0])
    np.testing.assert_array_equal(SK.indices(np.array(["chest", "neck"])), [1, 2])
    assert SK.indices([]).shape == (0,)


def test_a_duplicate_name_in_from_unordered_is_reported_as_such() -> None:
    with pytest.raises(SkeletonError, match=r"joint name 'hips' is used twice \(joints 0 and 1\)"):
        Skeleton.from_unordered(["hips", "hips", "knee"], [None, "hips", "hips"], np.zeros((3, 3)))
    with pytest.raises(SkeletonError, match=r"joint name 'knee' is used twice \(joints 1 and 2\)"):
        Skeleton.from_unordered(["hips", "knee", "knee"], [None, 0, 0], np.zeros((3, 3)))
    with pytest.raises(SkeletonError, match=r"joint 1 has an empty or non-string name: \['knee'\]"):
        Skeleton.from_unordered(["hips", ["knee"]], [None, 0], np.zeros((2, 3)))  # (unhashable: was a TypeError)
    sk, order = Skeleton.from_unordered(["knee", "hips"], ["hips", None], [[0.0, -1.0, 0.0], [0.0, 1.0, 0.0]])
    assert sk.names == ("hips", "knee") and order.tolist() == [1, 0]


@pytest.mark.parametrize("names", [{"hips", "spine", "head"}, frozenset({"hips", "spine", "head"})])
def test_names_in_an_unordered_container_are_refused(names: object) -> None:
    with pytest.raises(SkeletonError, match="names must be an ordered sequence of joint names .*order is arbitrary"):
        Skeleton(names, [-1, 0, 1], np.zeros((3, 3)))  # type: ignore[arg-type]
    with pytest.raises(SkeletonError, match="names must be an ordered sequence"):
        Skeleton.from_unordered(names, [None, "hips", "spine"], np.zeros((3, 3)))  # type: ignore[arg-type]
    with pytest.raises(SkeletonError, match="parents must be a sequence .* got set"):
        Skeleton.from_unordered(["a", "b"], {None, "a"}, np.zeros((2, 3)))


def test_names_in_ordered_containers_are_kept_in_their_order() -> None:
    order = {"hips": 0, "spine": 1, "head": 2}
    for names in (["hips", "spine", "head"], ("hips", "spine", "head"), order.keys(), np.array(list(order)),
                  iter(order)):
        assert Skeleton(names, [-1, 0, 1], np.zeros((3, 3))).names == ("hips", "spine", "head")


@pytest.mark.parametrize("call", [
    lambda: Skeleton(["a"], [-1], [[True, 0, 0]]),
    lambda: Skeleton(["a"], [-1], [[0.0, 0.0, 0.0]], [[0, 0, 0, np.True_]]),
    lambda: Skeleton(["a"], [-1], [(0, 0, 0)], scales=[[1.0, 1.0, True]]),
    lambda: Skeleton(["a", "b"], [-1, True], np.zeros((2, 3))),
    lambda: Skeleton(["a", "b"], [-1, 0], [np.array([True, False, False]), [1, 2, 3]]),
    lambda: Skeleton(["a"], [-1], [[[1, 0, False]][0]]),
    lambda: kinema.Pose([[0, 0, 0]], [[0, 0, 0, True]]),
], ids=["translation", "np.bool_ rotation", "scale", "parent", "bool array in a list", "nested", "pose"])
def test_a_bool_among_numbers_is_not_read_as_one(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ShapeError, match=r"non-numeric input \(a bool among the numbers"):
        call()


def test_a_bool_among_numbers_is_refused_where_the_conversion_is_shared() -> None:
    with pytest.raises(SolverInputError, match=r"Hinge axis must be 3 finite numbers, got \(True, 0, 0\)"):
        kinema.limits.Hinge((True, 0, 0), 0, 1)
    with pytest.raises(KinemaError, match="bool"):
        kinema.rotation.rotate([0.0, 0.0, 0.0, 1.0], [1.0, False, 0.0])
    with pytest.raises(KinemaError, match="bool"):
        kinema.forward_kinematics(SK, kinema.Pose(SK.translations, [[0, 0, 0, 1]] * 14 + [[0, 0, 0, True]]))


def test_numbers_of_every_other_kind_are_still_read() -> None:
    sk = Skeleton(["a", "b"], [-1, np.int32(0)], [[1, 2, 3], (np.float32(0.5), np.int64(1), 2.0)],
                  [[0, 0, 0, 1], [0, 0, np.float16(0), 1]])
    np.testing.assert_array_equal(sk.translations, [[1, 2, 3], [0.5, 1, 2]])
    assert kinema.limits.Hinge((1, 0, 0), 0, 1).axis == (1.0, 0.0, 0.0)
    np.testing.assert_array_equal(kinema.Pose([np.zeros(3)], [np.array([0, 0, 0, 1])]).rotations, [[0, 0, 0, 1]])
    with pytest.raises(ShapeError, match="non-numeric"):
        Skeleton(["a"], [-1], [True])  # a bare bool array stays refused (as before)
