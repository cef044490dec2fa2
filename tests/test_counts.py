"""Counts and batch shapes that size an allocation are refused before anything is allocated.

``Skeleton.rest_pose((10**9, 10**9))`` failed inside NumPy with a bare ValueError, ``rest_pose((10**6, 10**6))``
and ``Pose.broadcast((10**8, 3))`` with bare MemoryErrors, ``bone_mesh(segments=10**9)`` allocated until the
machine died and ``SkinnedMesh.skin_weights(10**12)`` raised MemoryError.  One limit,
``kinema._validate.MAX_ALLOCATION_BYTES``, now bounds every allocation a caller's count sizes.  Also here: the
other mesh defects of the same issue (ragged skinning input, a mirrored inverse bind matrix, very long bones).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kinema
from kinema import Pose, ShapeError, Skeleton, SolverInputError, _validate, forward_kinematics, world_to_local
from kinema.mesh import SkinnedMesh, bone_mesh, linear_blend_skinning

SK = kinema.samples.humanoid()
NJ = SK.n_joints
LIMIT = "more than the .* bytes kinema allocates at most \\(kinema._validate.MAX_ALLOCATION_BYTES"


def test_the_limit_is_the_machines_memory_or_a_fixed_size() -> None:
    assert isinstance(_validate.MAX_ALLOCATION_BYTES, int)
    assert 2**26 <= _validate.MAX_ALLOCATION_BYTES <= 2**50  # physical memory, or 2**40 where unknown


@pytest.mark.parametrize("call", [
    lambda: SK.rest_pose((10**9, 10**9)),
    lambda: SK.rest_pose((10**6, 10**6)),
    lambda: SK.rest_pose(10**12),
    lambda: SK.rest_pose().broadcast((10**8, 3)),
    lambda: SK.rest_pose((2,)).broadcast((10**9, 1)),
], ids=["rest_pose 1e18", "rest_pose 1e12", "rest_pose int", "broadcast", "broadcast batched"])
def test_absurd_batch_shapes_are_shape_errors(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ShapeError, match=LIMIT):
        call()


def test_arrays_sized_by_a_huge_broadcast_view_are_refused() -> None:
    """A pose may hold broadcast views of any batch; what FK, world_to_local, copy and indexing would allocate for
    it is checked first."""
    rest = SK.rest_pose()
    big = (10**7, 10**4)  # 10**11 items, nothing allocated
    pose = Pose(*(np.broadcast_to(a, big + a.shape) for a in (rest.translations, rest.rotations, rest.scales)))
    assert pose.batch_shape == big
    for call in (lambda: forward_kinematics(SK, pose), lambda: forward_kinematics(SK, pose, matrices=True),
                 pose.copy, lambda: pose[:5], lambda: pose.broadcast()):
        with pytest.raises(ShapeError, match=LIMIT):
            call()
    fk = forward_kinematics(SK, rest)
    with pytest.raises(ShapeError, match=LIMIT):
        world_to_local(SK, np.broadcast_to(fk.rotations, big + (NJ, 4)), fk.positions)


def test_the_limit_is_where_the_refusals_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lowered to 100 items of this skeleton's pose: 100 items pass, 101 do not, for every API that checks."""
    per_item = NJ * (3 + 4 + 3) * 8
    monkeypatch.setattr(_validate, "MAX_ALLOCATION_BYTES", 100 * per_item)
    assert SK.rest_pose((100,)).batch_shape == (100,)
    assert SK.rest_pose((10, 10)).batch_shape == (10, 10)
    with pytest.raises(ShapeError, match=LIMIT):
        SK.rest_pose((101,))
    assert SK.rest_pose().broadcast((100,)).batch_shape == (100,)
    with pytest.raises(ShapeError, match=LIMIT):
        SK.rest_pose().broadcast((101,))
    pose = SK.rest_pose((50,))
    assert pose[np.zeros(100, dtype=np.int64)].batch_shape == (100,)
    with pytest.raises(ShapeError, match=LIMIT):
        pose[np.zeros(101, dtype=np.int64)]
    # FK's results (8 floats a joint, 24 with matrices) and the pose's copies
    assert forward_kinematics(SK, SK.rest_pose((100,))).positions.shape == (100, NJ, 3)
    wide = Pose(*(np.broadcast_to(a, (150,) + a.shape) for a in (SK.translations, SK.rotations, SK.scales)))
    with pytest.raises(ShapeError, match=LIMIT):
        forward_kinematics(SK, wide)  # 150 items of results and broadcast copies
    with pytest.raises(ShapeError, match=LIMIT):
        wide.copy()


def test_mesh_counts_are_refused_before_allocating() -> None:
    with pytest.raises(SolverInputError, match="bone_mesh: segments=1000000000000000000 and rings=3 .*" + LIMIT):
        bone_mesh(SK, segments=10**18)
    with pytest.raises(SolverInputError, match="bone_mesh: segments=8 and rings=1000000000000 .*" + LIMIT):
        bone_mesh(SK, rings=10**12)
    mesh = bone_mesh(SK)
    with pytest.raises(SolverInputError, match=r"skin_weights: n_joints=1000000000000 for \d+ vertices .*" + LIMIT):
        mesh.skin_weights(10**12)
    dense = mesh.skin_weights(NJ)  # an ordinary count still works
    np.testing.assert_allclose(dense.sum(axis=1), 1.0)


def test_bone_mesh_with_a_billion_segments_is_refused_under_a_memory_limit() -> None:
    """Run with the address space capped (a child process): the refusal comes before any allocation."""
    code = textwrap.dedent("""
        import resource
        import kinema
        from kinema.mesh import bone_mesh
        sk = kinema.samples.humanoid()
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))
        try:
            bone_mesh(sk, segments=10**9)
        except kinema.SolverInputError as exc:
            print("refused:", exc)
        except BaseException as exc:
            print("other:", type(exc).__name__, exc)
        else:
            print("built")
    """)
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc (Linux)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "refused: bone_mesh: segments=1000000000 and rings=3" in out.stdout, (out.stdout, out.stderr[-2000:])


def test_ragged_skinning_input_is_a_shape_error() -> None:
    with pytest.raises(ShapeError, match=r"joints: expected shape \(2, K\) integer joint indices, got ragged"):
        linear_blend_skinning(np.zeros((2, 3)), [[0], [0, 0]], [[1.0], [1.0, 0.0]], np.eye(4)[None])
    with pytest.raises(ShapeError, match=r"weights: .*ragged"):
        linear_blend_skinning(np.zeros((2, 3)), [[0, 0], [0, 0]], [[1.0], [1.0, 0.0]], np.eye(4)[None])
    out = linear_blend_skinning(np.ones((2, 3)), [[0], [0]], [[1.0], [1.0]], np.eye(4)[None])
    np.testing.assert_array_equal(out, np.ones((2, 3)))


def test_skinning_a_batch_too_large_at_once_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_validate, "MAX_ALLOCATION_BYTES", 10**6)
    skin = np.broadcast_to(np.eye(4), (1000, 1, 4, 4))
    with pytest.raises(ShapeError, match=r"skin_matrices: .*got batch \(1000,\): .*" + LIMIT):
        linear_blend_skinning(np.zeros((100, 3)), np.zeros((100, 4), dtype=np.int64), np.full((100, 4), 0.25), skin)
    assert linear_blend_skinning(np.zeros((100, 3)), np.zeros((100, 4), dtype=np.int64), np.full((100, 4), 0.25),
                                 skin[:10]).shape == (10, 100, 3)


def test_a_mirrored_inverse_bind_matrix_is_named_by_field_and_index() -> None:
    mesh = bone_mesh(SK)
    ibm = np.array(mesh.inverse_bind_matrices)
    ibm[3] = ibm[3] @ np.diag([-1.0, 1.0, 1.0, 1.0])
    mirrored = SkinnedMesh(mesh.positions, mesh.indices, mesh.joints, mesh.weights, ibm, name="arm")
    with pytest.raises(SolverInputError, match=r"mesh 'arm': inverse_bind_matrices\[3\] is a mirror \(negative "
                                               r"determinant\)"):
        _ = mirrored.bind_rotations
    assert mirrored.skinned_positions(SK, SK.rest_pose()).shape == mesh.positions.shape  # skinning still works
    np.testing.assert_allclose(mesh.bind_positions, forward_kinematics(SK, SK.rest_pose()).positions, atol=1e-12)


@pytest.mark.parametrize("length", [1e155, 1e300])
def test_very_long_bones_get_their_capsules(length: float) -> None:
    sk = Skeleton(["a", "b"], [-1, 0], [[0.0, 0.0, 0.0], [0.0, length, 0.0]])
    mesh = bone_mesh(sk)
    assert np.all(np.isfinite(mesh.positions))
    top = mesh.positions[:, 1].max()  # the capsule reaches past the child by its radius, 12% of the length
    np.testing.assert_allclose(top, 1.12 * length, rtol=1e-12)
    np.testing.assert_allclose(mesh.bind_rotations[1], [0.0, 0.0, 0.0, 1.0], atol=1e-15)


def test_bones_too_long_for_float64_capsules_have_a_clear_message() -> None:
    sk = Skeleton(["a", "b"], [-1, 0], [[0.0, 0.0, 0.0], [1.7e308, 0.0, 0.0]])
    with pytest.raises(SolverInputError, match=r"bone_mesh: the skeleton spans 1.7e\+308 .*too large for a mesh"):
        bone_mesh(sk)
    far = Skeleton(["a", "b", "c"], [-1, -1, -1], [[-1e308, 0, 0], [1e308, 0, 0], [0, 0, 0]])
    with pytest.raises(SolverInputError, match=r"bone_mesh: the skeleton spans inf"):
        bone_mesh(far)
