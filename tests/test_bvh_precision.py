"""A BVH written in tiny units keeps the skeleton's shape: ``save_bvh`` refuses a ``precision`` too coarse for the
skeleton, and ``convert --scale`` writes the decimals that keep the input's resolution.

``kinema convert walk.bvh out.bvh --scale 1e-7`` wrote a centimetre skeleton's hip OFFSET ``1e-8 1.9e-7 1.05e-6``
as ``0.000000 0.000000 0.000001`` and said "wrote": the file no longer held the skeleton it claimed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinema
from _cli import run
from kinema.cli._files import bvh_precision
from kinema.io import load_bvh, save_bvh


@pytest.fixture(scope="module")
def bvh_path(shared_data: Path) -> Path:
    return shared_data / "bvh" / "bvhtools-test.bvh"


def _median_bone(sk: kinema.Skeleton) -> float:
    lengths = np.linalg.norm(sk.translations, axis=1)
    return float(np.median(lengths[lengths > 0]))


@pytest.mark.parametrize("scale", [1e-7, 1e-6])
def test_save_bvh_refuses_a_precision_too_coarse_for_the_skeleton(bvh_path: Path, tmp_path: Path,
                                                                  scale: float) -> None:
    sk, clip = load_bvh(bvh_path, scale=scale)
    out = tmp_path / "tiny.bvh"
    with pytest.raises(kinema.SolverInputError, match=r"precision=6 .*median bone .*write (\d+) decimals") as info:
        save_bvh(out, sk, clip)
    assert not out.exists()
    needed = int(str(info.value).split("write ")[1].split(" decimals")[0])
    # the decimals it names are enough: the file holds every OFFSET to within half its last digit, which is at
    # most 1e-2 of the median bone (RESOLUTION_RTOL)
    save_bvh(out, sk, clip, precision=needed)
    sk2, _ = load_bvh(out)
    resolution = 0.5 * 10.0**-needed
    assert resolution <= 1e-2 * _median_bone(sk)
    np.testing.assert_allclose(sk2.translations, sk.translations, rtol=0, atol=resolution * (1 + 1e-9))
    # and one decimal fewer would not have been
    with pytest.raises(kinema.SolverInputError):
        save_bvh(tmp_path / "fewer.bvh", sk, clip, precision=needed - 1)


def test_save_bvh_keeps_its_default_for_ordinary_units(bvh_path: Path, tmp_path: Path) -> None:
    """Centimetres and metres at 6 decimals are written as before (no refusal, the same text)."""
    for scale in (1.0, 0.01):
        sk, clip = load_bvh(bvh_path, scale=scale)
        save_bvh(tmp_path / "a.bvh", sk, clip)
        save_bvh(tmp_path / "b.bvh", sk, clip, precision=6)
        assert (tmp_path / "a.bvh").read_bytes() == (tmp_path / "b.bvh").read_bytes()


def test_bvh_precision_keeps_the_inputs_resolution() -> None:
    assert [bvh_precision(s) for s in (1.0, 100.0, 0.5, 0.1, 0.01, 0.001, 1e-7, 1e-30)] == [6, 6, 7, 7, 8, 9, 13, 17]


@pytest.mark.parametrize("scale", ["1e-7", "0.01"])
def test_convert_scale_writes_the_skeleton_it_says(capsys: pytest.CaptureFixture[str], bvh_path: Path,
                                                   tmp_path: Path, scale: str) -> None:
    """The scaled file holds the scaled skeleton and motion to the input's own resolution (6 decimals of its
    units, times the scale)."""
    out = tmp_path / "scaled.bvh"
    code, _, err = run(capsys, "convert", bvh_path, out, "--scale", scale)
    assert code == 0, err
    factor = float(scale)
    sk, clip = load_bvh(bvh_path)
    sk2, clip2 = load_bvh(out)
    atol = factor * 0.5e-6 * (1 + 1e-6)  # half a unit of the input's 6th decimal, scaled
    np.testing.assert_allclose(sk2.translations, sk.translations * factor, rtol=0, atol=atol)
    root = sk.index("Hips")
    np.testing.assert_allclose(clip2.pose.translations[:, root], clip.pose.translations[:, root] * factor,
                               rtol=0, atol=atol)
