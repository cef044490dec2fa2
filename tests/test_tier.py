"""Plain or compiled kernels (kinema._kernels._tier): a short job compiles nothing, a long one compiles, and the
two give the same numbers bit for bit."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kinema
from kinema._kernels import _tier

JIT_OFF = os.environ.get("NUMBA_DISABLE_JIT") == "1"
needs_jit = pytest.mark.skipif(JIT_OFF, reason="without the JIT every kernel is plain")


def _python(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", _tier.MODE_ENV)}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


#: Every kind of kernel the library has, on seeded random inputs: the four solvers with limits, poles, weights
#: and priorities, FK and its inverse, every rotation function, the limits' clamp and violation, a foot lock
#: (contact kernels) and the BVH writer (Euler angles, number formatting).  Writes an npz to sys.argv[1].
ALL_KERNELS = """
    import sys, io, tempfile, os
    import numpy as np
    import kinema
    from kinema import mocap, rotation as R, samples
    from kinema.goals import PositionGoal
    from kinema.limits import EulerRange, Hinge, SwingTwist
    out = {}
    rng = np.random.default_rng(5)
    sk = samples.humanoid()
    n = 40
    pose = sk.rest_pose()
    fk = kinema.forward_kinematics(sk, pose).positions
    wrist = fk[sk.index("right_wrist")]
    targets = wrist + rng.normal(0.0, 0.25, size=(n, 3))
    poles = wrist + np.array([0.0, 0.0, -0.5]) + rng.normal(0.0, 0.05, size=(n, 3))
    weights = rng.uniform(0.2, 1.0, size=n)
    limits = {"right_elbow": Hinge((0.0, 0.0, 1.0), 0.0, 2.5),
              "right_shoulder": SwingTwist((1.0, 0.0, 0.0), 1.2, -0.5, 0.5),
              "chest": EulerRange("XYZ", (-0.3, -0.4, -0.2), (0.3, 0.4, 0.2))}
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    chain = ("chest", "right_wrist")
    ankle = fk[sk.index("left_ankle")]
    for i in range(n):
        res = [kinema.TwoBone(sk, arm, limits={"right_elbow": limits["right_elbow"]}).solve(
                   pose, targets[i], pole=poles[i], weight=weights[i]),
               kinema.CCD(sk, chain, limits=limits).solve(pose, targets[i], weight=weights[i]),
               kinema.FABRIK(sk, chain, limits=limits).solve(pose, targets[i]),
               kinema.solve_dls(sk, pose, [PositionGoal("right_wrist", targets[i]),
                                           PositionGoal("left_ankle", ankle, priority=1)], limits=limits)]
        for name, r in zip(("two_bone", "ccd", "fabrik", "dls"), res):
            out[f"{name}_{i}_rot"] = r.pose.rotations
            out[f"{name}_{i}_err"] = np.asarray(r.error)
    poses = kinema.Pose(rng.normal(size=(30, sk.n_joints, 3)), rng.normal(size=(30, sk.n_joints, 4)),
                        rng.uniform(0.5, 2.0, size=(30, sk.n_joints, 3)))
    w = kinema.forward_kinematics(sk, poses, matrices=True)
    out["fk_pos"], out["fk_rot"], out["fk_mat"] = w.positions, w.rotations, w.matrices
    back = kinema.world_to_local(sk, w.rotations, w.positions, poses.scales)
    out["w2l_t"], out["w2l_r"] = back.translations, back.rotations
    q = rng.normal(size=(200, 4))
    p = rng.normal(size=(200, 4))
    v = rng.normal(size=(200, 3)) * np.exp(rng.uniform(-8, 8, size=(200, 1)))
    t = rng.uniform(0, 1, size=200)
    out["mul"] = R.multiply(q, p)
    out["norm"] = R.normalize(q)
    out["rotate"] = R.rotate(R.normalize(q), v)
    out["matrix"] = R.as_matrix(R.normalize(q))
    out["from_matrix"] = R.from_matrix(out["matrix"])
    out["rotvec"] = R.as_rotvec(R.normalize(q))
    out["from_rotvec"] = R.from_rotvec(v[:, :3])
    out["canonical"] = R.canonical(q)
    out["axis_angle_back"] = np.concatenate(R.as_axis_angle(R.normalize(q)), axis=None)
    out["axis_angle"] = R.from_axis_angle(v, t * 7.0)
    for seq in R.EULER_SEQUENCES:
        for s in (seq, seq.lower()):
            e = R.as_euler(R.normalize(q), s)
            out[f"euler_{s}"] = e
            out[f"from_euler_{s}"] = R.from_euler(s, e)
    out["slerp"] = R.slerp(R.normalize(q), R.normalize(p), t)
    out["nlerp"] = R.nlerp(R.normalize(q), R.normalize(p), t)
    out["angle"] = R.angle_between(R.normalize(q), R.normalize(p))
    out["two_vectors"] = R.from_two_vectors(v, rng.normal(size=(200, 3)))
    sw, tw = R.swing_twist(R.normalize(q), v)
    out["swing"], out["twist"] = sw, tw
    for name, lim in limits.items():
        c, hit = lim.clamp_hit(R.normalize(q))
        out[f"clamp_{name}"], out[f"hit_{name}"] = c, hit
        out[f"violation_{name}"] = lim.violation(R.normalize(q))
    walk = samples.clip("walk")
    locked = mocap.footlock(sk, walk)
    out["footlock_r"] = locked.clip.pose.rotations
    out["footlock_t"] = locked.clip.pose.translations
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "walk.bvh")
    kinema.io.save_bvh(path, sk, locked.clip)
    out["bvh"] = np.frombuffer(open(path, "rb").read(), dtype=np.uint8)
    out["bvh_read_r"] = kinema.io.load_bvh(path)[1].pose.rotations
    np.savez(sys.argv[1], **out)
    from kinema._kernels import _tier
    print("final", sorted(_tier._final))
    print("twins", sorted(_tier._twins))
"""


#: More paths, for the compiled-against-plain comparison only (too slow plain for the cold-cache test's budget):
#: per-item start poses, poles and ``twist="rest"``, FABRIK trees and chains of goals, the 2D solver, two-bone
#: history and its smooth mode, and rigs in units of 1e-60 and 1e60 (the paths that measure lengths whose
#: squares underflow or overflow).
MORE_KERNELS = """
    import sys
    import numpy as np
    import kinema
    from kinema import samples
    from kinema.limits import Hinge, SwingTwist
    out = {}
    rng = np.random.default_rng(9)
    base = samples.humanoid()
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    chain = ("chest", "right_wrist")
    limits = {"right_elbow": Hinge((0.0, 0.0, 1.0), 0.0, 2.5),
              "right_shoulder": SwingTwist((1.0, 0.0, 0.0), 1.2, -0.5, 0.5)}
    for unit in (1.0, 1e-60, 1e60):
        sk = kinema.Skeleton(list(base.names), base.parents, base.translations * unit, base.rotations, base.scales)
        n = 12
        poses = sk.rest_pose((n,))
        poses.rotations[:] = kinema.rotation.multiply(
            poses.rotations, kinema.rotation.from_rotvec(rng.normal(0.0, 0.3, size=(n, sk.n_joints, 3))))
        fk = kinema.forward_kinematics(sk, poses).positions
        wrist = fk[:, sk.index("right_wrist")]
        targets = wrist + rng.normal(0.0, 0.3 * unit, size=(n, 3))
        poles = wrist + rng.normal(0.0, 0.5 * unit, size=(n, 3))
        tag = f"{unit:g}"
        for i in range(n):
            p = poses[i]
            res = {
                "tb_rest": kinema.TwoBone(sk, arm, twist="rest").solve(p, targets[i], pole=poles[i]),
                "tb_soft": kinema.solve_two_bone(sk, p, arm, targets[i], poles[i], soft=0.2),
                "ccd_pole": kinema.CCD(sk, chain, limits=limits, twist="rest").solve(p, targets[i], pole=poles[i]),
                "fab_pole": kinema.FABRIK(sk, chain).solve(p, targets[i], pole=poles[i]),
                "tree": kinema.solve_fabrik_tree(sk, p, {"right_wrist": targets[i],
                                                         "left_wrist": fk[i, sk.index("left_wrist")] + 0.1 * unit}),
                "chains": kinema.solve_chains(sk, p, [
                    {"chain": chain, "target": targets[i], "priority": 1},
                    {"chain": ("left_hip", "left_ankle"), "target": fk[i, sk.index("left_ankle")] + 0.05 * unit}]),
            }
            for name, r in res.items():
                out[f"{tag}_{name}_{i}_rot"] = r.pose.rotations
                out[f"{tag}_{name}_{i}_t"] = r.pose.translations
                out[f"{tag}_{name}_{i}_err"] = np.asarray(r.error)
        for smooth in (False, True):
            ik = kinema.TwoBone(sk, arm, pole=poles[0], history=True, smooth=smooth)
            for i in range(n):
                r = ik.solve(poses[0], targets[i], dt=1.0 / 30.0)
                out[f"{tag}_history_{smooth}_{i}"] = r.pose.rotations
        r2 = kinema.solve_two_bone_2d(rng.normal(size=(50, 2)) * unit, rng.normal(size=(50, 2)) * 2 * unit,
                                      rng.uniform(0.5, 1.5, 50) * unit, rng.uniform(0.5, 1.5, 50) * unit)
        for k, v in vars(r2).items() if hasattr(r2, "__dict__") else enumerate(r2):
            if isinstance(v, np.ndarray):
                out[f"{tag}_2d_{k}"] = v
    np.savez(sys.argv[1], **out)
"""


#: Prepended to a script: ``compiles``, the qualified names of the functions numba compiles in that process.
COUNT_COMPILES = """
    from numba.core import event
    compiles = []
    class Count(event.Listener):
        def on_start(self, ev):
            compiles.append(ev.data["dispatcher"].py_func.__qualname__)
        def on_end(self, ev):
            pass
    event.register("numba:compile", Count())
"""


@needs_jit
@pytest.mark.parametrize("script", ["ALL_KERNELS", "MORE_KERNELS"])
def test_plain_kernels_give_the_compiled_numbers_bit_for_bit(tmp_path: Path, script: str) -> None:
    """The same inputs through every kind of kernel, once compiled (``KINEMA_COMPILE=always``, this run's numba
    cache) and once plain (``NUMBA_DISABLE_JIT=1``, what the plain twins run): every array equal bit for bit."""
    code = globals()[script].replace("sys.argv[1]", "OUT")
    compiled, plain = tmp_path / "compiled.npz", tmp_path / "plain.npz"
    check = "\nfrom kinema._kernels import _tier\nprint('twins', sorted(_tier._twins))\n"
    chosen = _python(textwrap.dedent(code.replace("OUT", repr(str(compiled)))) + check, KINEMA_COMPILE="always")
    assert "twins []" in chosen, chosen  # nothing ran plain
    _python(code.replace("OUT", repr(str(plain))), NUMBA_DISABLE_JIT="1")
    a, b = np.load(compiled), np.load(plain)
    assert sorted(a.files) == sorted(b.files)
    assert len(a.files) > 200
    differ = [k for k in a.files if not np.array_equal(a[k], b[k], equal_nan=True) or a[k].dtype != b[k].dtype]
    assert not differ, differ


@needs_jit
def test_a_short_job_on_a_cold_cache_compiles_nothing_and_gives_the_compiled_numbers(tmp_path: Path) -> None:
    """The same script in the default mode on an empty numba cache: no kernel compiles (numba's compile events),
    nothing is written to the cache, and its numbers equal the compiled run's bit for bit."""
    cache = tmp_path / "cache"
    code = textwrap.dedent(COUNT_COMPILES) + textwrap.dedent(ALL_KERNELS).replace(
        "sys.argv[1]", repr(str(tmp_path / "auto.npz"))) + "\nprint('compiles', len(compiles))\n"
    out = _python(code, NUMBA_CACHE_DIR=str(cache))
    assert "compiles 0" in out, out
    assert not list(cache.rglob("*.nbi")), list(cache.rglob("*.nbi"))
    assert "final []" in out, out  # no module was compiled
    _python(ALL_KERNELS.replace("sys.argv[1]", repr(str(tmp_path / "compiled.npz"))), KINEMA_COMPILE="always")
    a, b = np.load(tmp_path / "auto.npz"), np.load(tmp_path / "compiled.npz")
    differ = [k for k in a.files if not np.array_equal(a[k], b[k], equal_nan=True)]
    assert not differ, differ


@needs_jit
def test_a_large_call_compiles(tmp_path: Path) -> None:
    """A call beyond INTERPRET_MAX_ELEMENTS runs compiled code (its module is compiled from then on; the small
    call before it ran plain and gave the same numbers)."""
    out = _python("""
        import numpy as np
        from kinema import rotation as R
        from kinema._kernels import _tier
        rng = np.random.default_rng(1)
        big = rng.normal(size=(_tier.INTERPRET_MAX_ELEMENTS // 4 + 1, 4))
        small = R.multiply(big[:10], big[:10])
        print("small", sorted(_tier._final), sorted(_tier._twins))
        whole = R.multiply(big, big)
        print("large", sorted(_tier._final))
        print("same", np.array_equal(whole[:10], small))
        print("fk plain", _tier.is_plain(_tier.kernels("fk")))
    """, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    assert "small [] ['rotation']" in out, out
    assert "large ['rotation']" in out, out
    assert "same True" in out, out
    assert "fk plain True" in out, out  # the other modules stay plain
    assert list((tmp_path / "cache").rglob("rotation.mul-*.nbi"))


@needs_jit
def test_compile_always_compiles_on_first_use(tmp_path: Path) -> None:
    out = _python("""
        import numpy as np
        from kinema import rotation as R
        from kinema._kernels import _tier
        R.multiply(np.ones((2, 4)), np.ones((2, 4)))
        print(sorted(_tier._final), sorted(_tier._twins))
    """, NUMBA_CACHE_DIR=str(tmp_path / "cache"), KINEMA_COMPILE="always")
    assert "['rotation'] []" in out, out


@needs_jit
def test_a_cached_module_runs_compiled(tmp_path: Path) -> None:
    """A module an earlier process compiled is loaded from the cache, not run plain."""
    code = """
        import numpy as np
        from kinema import rotation as R
        from kinema._kernels import _tier
        R.multiply(np.ones((2, 4)), np.ones((2, 4)))
        print(sorted(_tier._final), sorted(_tier._twins))
    """
    cache = str(tmp_path / "cache")
    assert "[] ['rotation']" in _python(code, NUMBA_CACHE_DIR=cache)
    _python(code, NUMBA_CACHE_DIR=cache, KINEMA_COMPILE="always")
    assert "['rotation'] []" in _python(code, NUMBA_CACHE_DIR=cache)


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_tier.MODE_ENV, "sometimes")
    with pytest.raises(kinema.KinemaError, match="KINEMA_COMPILE must be one of auto, always, got 'sometimes'"):
        _tier._mode()
    monkeypatch.setenv(_tier.MODE_ENV, " Always ")
    assert _tier._mode() == "always"


@needs_jit
def test_a_plain_call_that_raises_is_undone_and_run_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python floats raise where compiled code gives inf (numba's NumPy error model): the plain call's writes
    are put back and the call runs compiled, whose result comes back."""
    from kinema._kernels._jit import njit

    @njit
    def writes_then_divides(out, x):  # type: ignore[no-untyped-def]
        out[0] += 5.0
        out[1] = 1.0 / (x * 1.0)  # a Python float in plain code: ZeroDivisionError at x = 0
        return out[0]

    compiled_now: list[str] = []
    monkeypatch.setattr(_tier, "_compile", lambda name: compiled_now.append(name))
    monkeypatch.setattr(_tier._Spent, "seconds", 0.0)
    monkeypatch.setattr(_tier._Spent, "always", False)  # (an in-process `kinema warmup` test may have set it)
    monkeypatch.delenv(_tier.MODE_ENV, raising=False)
    kernel = _tier._PlainKernel("test_module", writes_then_divides)
    out = np.zeros(2)
    assert kernel(out, 2.0) == 5.0 and out.tolist() == [5.0, 0.5]  # plain
    assert compiled_now == []
    out = np.zeros(2)
    assert kernel(out, 0.0) == 5.0  # out[0] was put back before the compiled run: 5, not 10
    assert out.tolist() == [5.0, math.inf]
    assert compiled_now == ["test_module"]


def test_hypot_is_libm_s_compiled_or_not() -> None:
    """:func:`kinema._kernels.quat.hypot` gives the compiled kernels' numbers in plain Python; ``math.hypot``
    (CPython's own algorithm) does not, for some inputs (why the kernels do not use it)."""
    from kinema._kernels._jit import njit
    from kinema._kernels.quat import hypot

    @njit
    def compiled(x, y):  # type: ignore[no-untyped-def]
        return hypot(x, y)

    rng = np.random.default_rng(0)
    xs = (rng.normal(size=20000) * np.exp(rng.uniform(-30, 30, size=20000))).tolist()
    ys = rng.normal(size=20000).tolist()
    plain = getattr(hypot, "py_func", hypot)
    assert all(compiled(x, y) == plain(x, y) for x, y in zip(xs, ys, strict=True))
    if not JIT_OFF:
        assert any(compiled(x, y) != math.hypot(x, y) for x, y in zip(xs, ys, strict=True))


#: A loop of small rotation products past a tiny plain budget; prints what ran where.
BUDGET_LOOP = """
    import sys, time
    import numpy as np
    from kinema import _precompile, rotation as R
    from kinema._kernels import _tier
    if sys.argv[1] == "one-cpu":
        _precompile._cpus = lambda: 1
    _tier.INTERPRET_BUDGET_S = 0.05
    q = np.random.default_rng(2).normal(size=(8, 4))
    first = R.multiply(q, q)
    plain_after_budget = 0
    deadline = time.monotonic() + 300
    while "rotation" not in _tier._final and time.monotonic() < deadline:
        past = _tier._Spent.seconds >= _tier.INTERPRET_BUDGET_S
        R.multiply(q, q)
        if past and "rotation" not in _tier._final:  # a call begun past the budget ran plain
            plain_after_budget += 1
    last = R.multiply(q, q)
    print("beside", _tier._Spent.beside, "final", sorted(_tier._final))
    print("plain after budget", plain_after_budget > 0)
    print("compiled here", sorted(set(compiles)))
    print("same", np.array_equal(first, last))
"""


@needs_jit
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sched_getaffinity")
def test_past_the_budget_a_worker_compiles_what_ran_plain(tmp_path: Path) -> None:
    """Past its plain budget a process goes on with the plain kernels while a worker compiles the calls it ran
    (their very signatures); then it loads them from the cache, compiling nothing itself.  On one CPU it
    compiles them itself at once."""
    code = "import sys\nsys.argv[1:] = [MODE]\n" + textwrap.dedent(COUNT_COMPILES) + textwrap.dedent(BUDGET_LOOP)
    out = _python(code.replace("MODE", "'two-cpus'"), NUMBA_CACHE_DIR=str(tmp_path / "two"))
    assert "beside True final ['rotation']" in out, out
    assert "plain after budget True" in out, out
    assert "compiled here []" in out, out  # loaded from the worker's cache
    assert "same True" in out, out
    assert list((tmp_path / "two").rglob("rotation.mul-*.nbi"))
    out = _python(code.replace("MODE", "'one-cpu'"), NUMBA_CACHE_DIR=str(tmp_path / "one"))
    assert "beside False final ['rotation']" in out, out
    assert "plain after budget False" in out, out
    assert "'mul'" in out.split("compiled here")[1].split("\n")[0], out
    assert "same True" in out, out


#: ``math`` functions whose plain-Python form is CPython's own algorithm, not the libm function numba compiles
#: (``hypot`` differs in the last bit for 0.2% of inputs): kernels use :func:`kinema._kernels.quat.hypot`.
CPYTHON_OWN = {"hypot", "dist", "fsum", "prod", "sumprod"}


def test_kernels_use_no_operation_whose_plain_form_differs() -> None:
    """Inside kernel functions: no ``**`` (numba multiplies for an integer power, plain Python calls libm's
    ``pow``: 258 of 300,000 squares differ) and none of :data:`CPYTHON_OWN`.  (Module-level constants, computed
    once in Python, may.)  The plain-against-compiled tests above catch what this list misses."""
    import ast

    import kinema._kernels as package

    found = []
    for path in sorted(Path(package.__path__[0]).glob("*.py")):
        tree = ast.parse(path.read_text())
        for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
                    found.append(f"{path.name}:{node.lineno} **")
                if isinstance(node, ast.Attribute) and node.attr in CPYTHON_OWN and \
                        isinstance(node.value, ast.Name) and node.value.id == "math":
                    found.append(f"{path.name}:{node.lineno} math.{node.attr}")
    assert not found, found


@needs_jit
def test_helpers_left_in_the_cache_do_not_count_as_compiled(tmp_path: Path) -> None:
    """A worker killed half-way leaves helpers in the cache without their entry point: the module still runs
    plain (taking it for compiled would compile the entry point here); with the entry point cached it runs
    compiled."""
    cache = tmp_path / "cache"
    code = """
        import numpy as np
        from kinema import rotation as R
        from kinema._kernels import _tier
        R.from_two_vectors(np.ones((2, 3)), np.eye(3)[:2])
        print(sorted(_tier._final), sorted(_tier._twins))
    """
    _python(code, NUMBA_CACHE_DIR=str(cache), KINEMA_COMPILE="always")
    entries = [p for p in cache.rglob("rotation.*.nbi") if not p.name.startswith("rotation.vtamed-")]
    assert entries and list(cache.rglob("rotation.vtamed-*.nbi"))  # (vtamed: a helper of rotation's kernels)
    for p in entries:
        p.unlink()
    assert "[] ['rotation']" in _python(code, NUMBA_CACHE_DIR=str(cache))
    _python(code, NUMBA_CACHE_DIR=str(cache), KINEMA_COMPILE="always")
    assert "['rotation'] []" in _python(code, NUMBA_CACHE_DIR=str(cache))


def _rotation_cases() -> list[tuple[str, tuple[int, ...], tuple[Any, ...]]]:
    """``(kernel, input tails, extra scalar arguments)`` of every rotation kernel: inputs are float arrays
    ``(n, *tail)``; the outputs are made to match by :func:`_rotation_outputs`."""
    return [("mul", ((4,), (4,)), ()), ("normalize", ((4,),), ()), ("canonical", ((4,),), ()),
            ("rotate", ((4,), (3,)), ()), ("to_matrix", ((4,),), ()), ("from_matrix", ((3, 3),), ()),
            ("to_rotvec", ((4,),), ()), ("from_rotvec", ((3,),), ()),
            ("from_euler", ((3,),), (2, 0, 1, True)), ("to_euler", ((4,),), (0, 1, 2, False)),
            ("to_euler", ((4,),), (2, 0, 2, True)), ("slerp", ((4,), (4,), ()), ()), ("nlerp", ((4,), (4,), ()), ()),
            ("angle_between", ((4,), (4,)), ()), ("from_two_vectors", ((3,), (3,)), ()),
            ("from_axis_angle", ((3,), ()), ()), ("swing_twist", ((4,), (3,)), ())]


_OUT_TAILS = {"mul": [(4,)], "normalize": [(4,)], "canonical": [(4,)], "rotate": [(3,)], "to_matrix": [(3, 3)],
              "from_matrix": [(4,)], "to_rotvec": [(3,)], "from_rotvec": [(4,)], "from_euler": [(4,)],
              "to_euler": [(3,)], "slerp": [(4,)], "nlerp": [(4,)], "angle_between": [()],
              "from_two_vectors": [(4,)], "from_axis_angle": [(4,)], "swing_twist": [(4,), (4,)]}


@needs_jit
@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(range(17)), seed=st.integers(0, 2**32 - 1), exponent=st.integers(-200, 200),
       n=st.integers(1, 6))
def test_plain_and_compiled_rotation_kernels_agree_on_random_inputs(case: int, seed: int, exponent: int,
                                                                    n: int) -> None:
    """Each rotation kernel and its plain twin (:func:`kinema._kernels._tier.plain`) on the same random inputs,
    at sizes from 2**-200 to 2**200 (exact scalings), exactly equal (NaN where both give NaN).  A plain call that
    raises is what the tier undoes and runs compiled: nothing to compare then."""
    import importlib

    krot = importlib.import_module("kinema._kernels.rotation")
    name, tails, extra = _rotation_cases()[case]
    rng = np.random.default_rng(seed)
    inputs = []
    for tail in tails:
        a = rng.normal(size=(n, *tail)) * rng.choice([1e-9, 1.0, 1e9], size=(n, *tail))
        if tail != ():  # (slerp and axis-angle amounts stay plain numbers)
            a = np.ldexp(a, exponent)
        inputs.append(np.ascontiguousarray(a))
    outs = [[np.zeros((n, *t)) for t in _OUT_TAILS[name]] for _ in range(2)]
    getattr(krot, name)(*[a.copy() for a in inputs], *extra, *outs[0])
    try:
        with np.errstate(all="ignore"):
            _tier.plain(getattr(krot, name))(*[a.copy() for a in inputs], *extra, *outs[1])
    except (ArithmeticError, ValueError):
        return
    for c, p in zip(outs[0], outs[1], strict=True):
        np.testing.assert_array_equal(c, p, err_msg=name)


def test_calls_recorded_while_the_budget_s_calls_are_pickled_do_not_break_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pickling the calls for the worker runs Python code (a type's ``__reduce__``), between which another
    thread's plain call may record a new one: the budget's check must not fail on it."""
    from kinema import _precompile

    class RecordsWhilePickled:
        def __reduce__(self) -> tuple[Any, ...]:
            # what other threads' plain calls would do: a new kernel's call, a new signature of a recorded one
            _tier._calls[("rotation", "mul", "")] = {("another",)}
            _tier._calls[("fk", "fk_serial", "")].add(("float64",))
            return (str, ("recorded",))

    monkeypatch.setattr(_tier, "_calls", {("quat", "qmul", ""): {(RecordsWhilePickled(),)},
                                          ("fk", "fk_serial", ""): {("int64",)}})
    monkeypatch.setattr(_tier._Spent, "seconds", _tier.INTERPRET_BUDGET_S)
    monkeypatch.setattr(_tier._Spent, "beside", None)
    payloads: list[bytes] = []
    monkeypatch.setattr(_precompile, "start", lambda group, payload=None: payloads.append(payload) or True)
    monkeypatch.setattr(_precompile, "running", lambda group: True)
    assert _tier._past_budget() is False  # a worker compiles beside this process
    import pickle

    assert pickle.loads(payloads[0]) == {("quat", "qmul", ""): {("recorded",)}, ("fk", "fk_serial", ""): {("int64",)}}
