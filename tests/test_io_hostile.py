"""Hostile files: the BVH and glTF loaders refuse them with FileFormatError, read nothing outside the
asset's folder, never block and never allocate what a tiny file asks for (issue 15, points 1, 3 and 6).

Every load here runs under three watches:

* an audit hook (:func:`sys.addaudithook`, event ``"open"``) records every file opened while a load
  runs; a load may open only files inside the asset's folder (and Python, numba or kinema code);
* a deadline (``signal.setitimer``): a load that blocks (a FIFO) fails the test instead of hanging it;
* :mod:`tracemalloc` (NumPy reports its buffers to it): the peak of a load stays far below what the
  crafted counts ask for.

The fuzz test mutates the real files (truncations, byte flips, crafted URIs and counts) with a fixed
seed and a fixed number of cases (a few seconds).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import errno
import json
import os
import re
import signal
import stat
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from _io_mutate import GOOD_BVH, json_leaves, mutate_bytes, small_capture
from kinema import FileFormatError, SolverInputError, forward_kinematics
from kinema.io import _atomic, load_bvh, load_gltf, save_bvh, save_gltf
from kinema.io._read import PATH_CHARS, SHOWN_CHARS, read_regular, short_repr
from kinema.io.gltf.reader import DECODE_BUDGET_FACTOR, DECODE_BUDGET_FLOOR, read_external

#: Longest a single load of these small files may take (warm kernels take milliseconds).
LOAD_DEADLINE_S = 20.0
#: A load's tracemalloc peak may exceed its decoding budget by this much (Python objects, JSON).
PEAK_SLACK_BYTES = 32 << 20

# --------------------------------------------------------------------------- watches
_OPENED: list[str] | None = None  # paths opened while a watched load runs (None: not recording)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _OPENED is not None and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(os.fspath(args[0])))


sys.addaudithook(_audit)  # hooks cannot be removed: this one only records while _OPENED is a list


def _code_folders() -> tuple[str, ...]:
    """Folders whose files a load may open besides the asset's: Python's, numba's cache, kinema's code."""
    from kinema._kernels import _jit

    # numba's cache: kinema's own folder (NUMBA_CACHE_DIR or ~/.cache/kinema/numba, keyed by the kernels'
    # sources), where a kernel compiled for the first time during a load is written.
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(kinema.__file__), _jit._CACHE_DIR}
    if os.environ.get("NUMBA_CACHE_DIR"):
        folders.add(os.environ["NUMBA_CACHE_DIR"])
    return tuple(os.path.realpath(f) for f in folders)


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(folder)


class Hang(Exception):
    """A watched load ran past its deadline."""


@contextlib.contextmanager
def watched(folder: Path, deadline_s: float = LOAD_DEADLINE_S, *, memory: bool = True) -> Iterator[dict[str, Any]]:
    """Record opened files and (``memory``) the tracemalloc peak of the block; raise :class:`Hang` past
    the deadline.

    Yields a dict that gets ``"opened"`` (paths) and ``"peak"`` (bytes, 0 without ``memory``) when the
    block ends; on exit every opened path must be inside ``folder`` or a code folder.
    """
    global _OPENED

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"a load took more than {deadline_s} s")

    out: dict[str, Any] = {}
    _OPENED = []
    old = signal.signal(signal.SIGALRM, on_alarm)
    if memory:  # tracemalloc slows allocation-heavy code several times
        tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, deadline_s)
    try:
        yield out
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)
        out["peak"] = tracemalloc.get_traced_memory()[1] if memory else 0
        if memory:
            tracemalloc.stop()
        out["opened"], _OPENED = _OPENED, None
    code = _code_folders()
    outside = [p for p in out["opened"] if not _inside(p, str(folder)) and not any(_inside(p, c) for c in code)]
    assert not outside, f"files opened outside {folder}: {outside}"


def test_the_watches_catch_an_outside_open_and_a_blocking_fifo(tmp_path: Path) -> None:
    """Controls: the watch itself fails a test that opens a file outside the folder or blocks."""
    (tmp_path / "asset").mkdir()
    (tmp_path / "outside.txt").write_text("x")
    with pytest.raises(AssertionError, match="outside.txt"), watched(tmp_path / "asset"):
        (tmp_path / "outside.txt").read_text()
    os.mkfifo(tmp_path / "asset" / "fifo")
    with pytest.raises(Hang), watched(tmp_path / "asset", deadline_s=0.3):
        open(tmp_path / "asset" / "fifo", "rb").close()  # blocks until a writer comes: none does
    with watched(tmp_path / "asset") as w:
        big = np.ones(4 << 20)  # 32 MiB
    assert w["peak"] >= big.nbytes


# --------------------------------------------------------------------------- helpers
def _doc(shared_data: Path, name: str = "RiggedSimple.gltf") -> dict[str, Any]:
    return json.loads((shared_data / "gltf" / name).read_text())


def _buffer_bytes(doc: dict[str, Any]) -> bytes:
    return base64.b64decode(doc["buffers"][0]["uri"].split(",", 1)[1])


def _write(folder: Path, doc: dict[str, Any], name: str = "asset.gltf") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def _refused(path: Path, where: str, fragment: str = "", **kw: Any) -> tuple[FileFormatError, dict[str, Any]]:
    """Load ``path`` under watch: a FileFormatError naming the file and JSON path ``where``; returns it
    and what :func:`watched` saw."""
    with watched(path.parent) as w, pytest.raises(FileFormatError) as info:
        load_gltf(path, **kw)
    err = info.value
    assert err.path == os.fspath(path) and err.line == where, str(err)
    assert fragment in str(err), str(err)
    assert str(err).startswith(f"{path} at {where}: ")
    return err, w


@pytest.fixture(scope="module", autouse=True)
def _warm(shared_data: Path) -> None:
    """Compile the loaders' kernels once, outside the deadlines."""
    load_gltf(shared_data / "gltf" / "RiggedSimple.gltf")
    load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")


# ============================================================== glTF resources stay in the folder
@pytest.fixture
def layout(tmp_path: Path, shared_data: Path) -> dict[str, Any]:
    """``tmp/asset/`` (the asset's folder) with the real buffer as ``buf.bin``, a sub folder, a FIFO,
    symlinks out of the folder; ``tmp/secret.bin`` (a valid buffer!) outside it."""
    doc = _doc(shared_data)
    data = _buffer_bytes(doc)
    asset = tmp_path / "asset"
    (asset / "sub").mkdir(parents=True)
    (asset / "buf.bin").write_bytes(data)
    (asset / "sub" / "in sub.bin").write_bytes(data)
    (tmp_path / "secret.bin").write_bytes(data)
    os.symlink(tmp_path / "secret.bin", asset / "link_out.bin")
    os.symlink(asset / "buf.bin", asset / "link_in.bin")
    os.symlink("/dev/zero", asset / "zero.bin")
    os.symlink(tmp_path, asset / "up")
    os.mkfifo(asset / "fifo.bin")
    return {"doc": doc, "asset": asset, "secret": tmp_path / "secret.bin", "size": len(data)}


ESCAPING_URIS = [
    ("../secret.bin", "resolves outside"),
    ("%2e%2e/secret.bin", "resolves outside"),
    ("..%2Fsecret.bin", "resolves outside"),
    ("sub/../../secret.bin", "resolves outside"),
    ("sub%2F..%2F..%2Fsecret.bin", "resolves outside"),
    ("link_out.bin", "resolves outside"),  # a symlink in the folder pointing out of it
    ("up/secret.bin", "resolves outside"),  # a symlinked folder pointing up
    ("zero.bin", "resolves outside"),  # /dev/zero through a symlink
    ("%2Fdev%2Fzero", "relative to the asset's folder"),
    ("%2Fetc%2Fpasswd", "relative to the asset's folder"),
    ("/etc/passwd", "only relative file URIs"),
    ("/proc/self/environ", "only relative file URIs"),
    ("file:///etc/passwd", "only relative file URIs"),
    ("//host/share/x.bin", "only relative file URIs"),
    ("fifo.bin", "is a FIFO"),
    ("sub", "is a folder"),
    ("buf.bin\0.png", "NUL byte"),
    ("buf.bin%00", "NUL byte"),
    ("%ff%fe.bin", "not a valid file name"),
    ("buf.bin?x=1", "query or fragment"),
]


@pytest.mark.parametrize(("uri", "fragment"), ESCAPING_URIS, ids=[u for u, _ in ESCAPING_URIS])
def test_buffer_uris_are_confined_to_the_asset_folder(layout: dict[str, Any], uri: str, fragment: str) -> None:
    doc = copy.deepcopy(layout["doc"])
    doc["buffers"][0]["uri"] = uri
    path = _write(layout["asset"], doc)
    err, _ = _refused(path, "buffers[0].uri", fragment)
    assert str(layout["secret"]) not in str(err)  # the message does not tell where a link points


@pytest.mark.parametrize("uri", ["buf.bin", "sub/in%20sub.bin", "sub/../buf.bin", "link_in.bin", "./buf.bin"])
def test_buffer_uris_inside_the_folder_still_load(layout: dict[str, Any], shared_data: Path, uri: str) -> None:
    ref = load_gltf(shared_data / "gltf" / "RiggedSimple.gltf")
    doc = copy.deepcopy(layout["doc"])
    doc["buffers"][0]["uri"] = uri
    path = _write(layout["asset"], doc)
    with watched(layout["asset"]) as w:
        asset = load_gltf(path)
    assert any(_inside(p, str(layout["asset"])) and p.endswith(".bin") for p in w["opened"])
    np.testing.assert_array_equal(asset.skeleton.translations, ref.skeleton.translations)
    assert asset.mesh is not None and ref.mesh is not None
    np.testing.assert_array_equal(asset.mesh.positions, ref.mesh.positions)


def test_a_short_buffer_file_is_refused_before_it_is_opened(layout: dict[str, Any]) -> None:
    (layout["asset"] / "short.bin").write_bytes(b"\0" * 100)
    doc = copy.deepcopy(layout["doc"])
    doc["buffers"][0]["uri"] = "short.bin"
    path = _write(layout["asset"], doc)
    with watched(layout["asset"]) as w, pytest.raises(FileFormatError, match="has 100 bytes, fewer than"):
        load_gltf(path)
    assert not [p for p in w["opened"] if p.endswith("short.bin")]  # stat said so; never opened


def _load_or_error(path: Path, **kw: Any) -> Any:
    """``load_gltf(path)``'s skeleton translations and source files, or its error's JSON path and reason."""
    try:
        asset = load_gltf(path, **kw)
    except FileFormatError as exc:
        return exc.line, exc.reason
    return asset.skeleton.translations.tolist(), asset.skeleton.meta["source_files"]


@pytest.mark.parametrize("uri", ["buf.bin", "sub/in%20sub.bin", "link_in.bin", "../secret.bin", "link_out.bin",
                                 "fifo.bin", "zero.bin", "missing.bin", "short.bin", "sub"])
def test_external_buffers_read_beside_the_file_load_a_copy_elsewhere(layout: dict[str, Any], tmp_path: Path,
                                                                     uri: str) -> None:
    """A batch's Dask worker loads a copy of the .gltf with the buffers read beside the original: the same
    result, or the same error at the same JSON path, and nothing of the original's folder is opened."""
    (layout["asset"] / "short.bin").write_bytes(b"\0" * 100)
    doc = copy.deepcopy(layout["doc"])
    doc["buffers"][0]["uri"] = uri
    doc["buffers"].append({"uri": "fifo.bin", "byteLength": 10})  # no bufferView uses it: never read
    path = _write(layout["asset"], doc)
    with watched(layout["asset"], deadline_s=5.0):
        external = read_external(str(path), path.read_bytes())
    assert external.refused.get("fifo.bin", "").endswith("is a FIFO; only regular files are read")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / path.name).write_bytes(path.read_bytes())
    with watched(elsewhere, deadline_s=5.0):
        got = _load_or_error(elsewhere / path.name, external=external)
    assert got == _load_or_error(path)


def test_a_fifo_given_as_the_file_is_refused_without_blocking(tmp_path: Path) -> None:
    for name, load in (("x.gltf", load_gltf), ("x.glb", load_gltf), ("x.bvh", load_bvh)):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with watched(tmp_path, deadline_s=5.0), pytest.raises(FileFormatError, match="is a FIFO") as info:
            load(fifo)
        assert info.value.path == os.fspath(fifo)


def test_read_regular_refuses_devices_and_short_proc_files() -> None:
    with pytest.raises(FileFormatError, match="character device"):
        read_regular("/dev/zero", size=10)
    status = "/proc/self/status"
    if os.path.exists(status):  # a regular file that stat says is empty: never read past byteLength
        assert stat.S_ISREG(os.stat(status).st_mode)
        with pytest.raises(FileFormatError, match="has 0 bytes, fewer than the 10 needed"):
            read_regular(status, size=10)


LONG = 100_000  # characters of a junk value in a file


@pytest.mark.parametrize("uri", ["a" * LONG, "http://" + "x" * LONG, "%ff" + "a" * LONG, "b" * LONG + "?q",
                                 "/" + "c" * LONG],
                         ids=["name", "scheme", "bad-escape", "query", "absolute"])
def test_a_huge_uri_is_cut_in_the_error_message(layout: dict[str, Any], uri: str) -> None:
    doc = copy.deepcopy(layout["doc"])
    doc["buffers"][0]["uri"] = uri
    path = _write(layout["asset"], doc)
    err, _ = _refused(path, "buffers[0].uri")
    message = str(err)
    assert len(message) < len(str(path)) + PATH_CHARS + 200, message[:300]
    quoted = message[message.index("'"):]  # the uri (or the file it names), cut: its start, "...", its length
    assert re.match(r"'[^']{20,1100}\.\.\. \(1\d\d,\d{3} characters\)", quoted), message[:300]
    assert "c" * 100 not in message and "a" * 2000 not in message


def test_a_huge_line_and_joint_name_are_cut_in_bvh_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.bvh"
    for old, new, fragment in (("Frame Time: 0.04", "Frame Time: " + "1" * LONG, "Frame Time: '111"),
                               ("JOINT Leg", "JOINT " + "L" * LONG + "\n  JOINT x", "expected '{' to open joint")):
        path.write_text(GOOD_BVH.replace(old, new, 1))
        with pytest.raises(FileFormatError, match=fragment) as info:
            load_bvh(path)
        assert len(str(info.value)) < len(str(path)) + 200, str(info.value)[:300]
        assert re.search(r"\.\.\. \(1\d\d,\d{3} characters\)", str(info.value)), str(info.value)[:300]


def test_short_repr_keeps_short_values_and_cuts_long_ones() -> None:
    assert short_repr("buf.bin") == "'buf.bin'"
    assert short_repr("x" * 58) == repr("x" * 58)  # 60 characters with its quotes: whole
    assert short_repr("x" * 100) == "'" + "x" * 59 + "... (100 characters)"
    assert short_repr(b"\0" * 1000) == repr(b"\0" * 1000)[:SHOWN_CHARS] + "... (1,000 bytes)"
    assert short_repr(list(range(1000))).endswith("... (1,000 items)")
    assert short_repr("/p" * 100, PATH_CHARS) == repr("/p" * 100)


def test_data_uris_are_checked_before_decoding(layout: dict[str, Any]) -> None:
    doc = copy.deepcopy(layout["doc"])
    payload = doc["buffers"][0]["uri"].split(",", 1)[1]
    doc["buffers"][0]["byteLength"] = 10**9  # a gigabyte claimed by an 11 KB data URI
    _refused(_write(layout["asset"], doc), "buffers[0].byteLength", "the data URI holds at most")
    doc["buffers"][0]["byteLength"] = layout["size"]
    doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + payload[:-8] + "!!!!" + payload[-4:]
    _refused(_write(layout["asset"], doc), "buffers[0].uri", "invalid base64")
    doc["buffers"][0]["byteLength"] = 2**40
    _refused(_write(layout["asset"], doc), "buffers[0].byteLength", "must be in [1, 4294967295]")
    # A payload longer than byteLength is fine (the spec allows it): only byteLength bytes are decoded.
    doc["buffers"][0]["byteLength"] = layout["size"]
    doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + payload + "AAAA" * 1000
    with watched(layout["asset"]):
        assert load_gltf(_write(layout["asset"], doc)).skeleton.n_joints == 2


# ============================================================== counts and the decoding budget
def test_a_huge_accessor_without_buffer_view_is_refused_without_allocating(layout: dict[str, Any]) -> None:
    """The issue's case: ``count = 2**24`` MAT4 and no bufferView in a 25 KB file asked for 2.3 GB."""
    doc = copy.deepcopy(layout["doc"])
    doc["accessors"].append({"componentType": 5126, "count": 2**24, "type": "MAT4"})
    doc["skins"][0]["inverseBindMatrices"] = len(doc["accessors"]) - 1
    path = _write(layout["asset"], doc)
    assert path.stat().st_size < 30_000
    with watched(layout["asset"]) as w, pytest.raises(FileFormatError) as info:
        load_gltf(path)
    assert info.value.line == f"accessors[{len(doc['accessors']) - 1}].count"
    assert "without a bufferView" in str(info.value) and "more than this file may decode" in str(info.value)
    assert w["peak"] < 16 << 20, w["peak"]  # the 1 GiB of zeros was never made


def test_accessor_counts_must_fit_their_buffer_view(layout: dict[str, Any]) -> None:
    doc = copy.deepcopy(layout["doc"])
    ibm = doc["skins"][0]["inverseBindMatrices"]
    doc["accessors"][ibm]["count"] = 2**24
    _, w = _refused(_write(layout["asset"], doc), f"accessors[{ibm}].count", "need")
    assert w["peak"] < 16 << 20


def test_a_clip_of_many_joints_and_keys_is_charged_to_the_budget(tmp_path: Path) -> None:
    """3,000 joints and one 4,000-key channel (a 110 KB file) would make 3 poses of 3,000 x 4,000 x 10 floats
    (2.9 GB): refused, with and without resampling; the same animation on two joints loads."""
    n_joints, n_keys = 3000, 4000
    times = np.arange(n_keys, dtype="<f4") / 30
    values = np.tile(np.array([0, 0, 0, 1], dtype="<f4"), (n_keys, 1))
    blob = times.tobytes() + values.tobytes()
    doc = {
        "asset": {"version": "2.0"},
        "nodes": [{"name": "root", "children": list(range(1, n_joints))}] + [{"name": f"j{i}"}
                                                                             for i in range(1, n_joints)],
        "skins": [{"joints": list(range(n_joints))}],
        "buffers": [{"byteLength": len(blob),
                     "uri": "data:application/octet-stream;base64," + base64.b64encode(blob).decode()}],
        "bufferViews": [{"buffer": 0, "byteLength": times.nbytes},
                        {"buffer": 0, "byteOffset": times.nbytes, "byteLength": values.nbytes}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": n_keys, "type": "SCALAR"},
                      {"bufferView": 1, "componentType": 5126, "count": n_keys, "type": "VEC4"}],
        "animations": [{"samplers": [{"input": 0, "output": 1}],
                        "channels": [{"sampler": 0, "target": {"node": 0, "path": "rotation"}}]}],
    }
    path = _write(tmp_path, doc)
    _, w = _refused(path, "animations[0]", f"{n_keys} key times for {n_joints} joints")
    assert w["peak"] < 64 << 20
    _refused(path, "animations[0]", "resampling", fps=1e6)  # the same through resampling
    doc["skins"][0]["joints"] = [0, 1]  # a small skeleton: the same animation loads
    del doc["nodes"][2:]
    doc["nodes"][0]["children"] = [1]
    assert load_gltf(_write(tmp_path, doc)).clips["animation_0"].n_frames == n_keys


#: Crafted hierarchies that took minutes when the cycle check walked every node's ancestors (a
#: 30,000-deep chain: about 45 s) or every joint composed its whole ancestor chain (2,000 joints below a
#: 2,000-node chain: 208 s); they load in seconds now.
CHAIN_NODES = 30_000
STAR_NODES = 2000
SCALED_NODES = 4000
HIERARCHY_DEADLINE_S = 30.0


def test_deep_and_wide_hierarchies_load_in_linear_time(tmp_path: Path) -> None:
    """A chain of 2,000 translated nodes above a hub with 2,000 joints (50 KB), a 30,000-deep chain, and
    2,000 joints each below a non-uniform scale (every such segment becomes joints); a cycle is refused."""
    half = STAR_NODES
    star: list[dict[str, Any]] = [{"translation": [0.0, 0.001, 0.0], "children": [i + 1]} for i in range(half)]
    star.append({"children": list(range(half + 1, half + 1 + half))})
    star += [{"translation": [float(k), 0.0, 0.0]} for k in range(half)]
    chain: list[dict[str, Any]] = [{"children": [i + 1]} for i in range(CHAIN_NODES - 1)] + [{}]
    scaled: list[dict[str, Any]] = []
    for i in range(SCALED_NODES // 2):
        scaled.append({"scale": [1.0, 2.0, 1.0] if i % 2 == 0 else [1.0, 0.5, 1.0], "children": [2 * i + 1]})
        scaled.append({"children": [2 * i + 2]} if i + 1 < SCALED_NODES // 2 else {})
    files = {
        "star": ({"nodes": star, "skins": [{"joints": list(range(half + 1, half + 1 + half))}]}, half),
        "chain": ({"nodes": chain}, CHAIN_NODES),
        "scaled": ({"nodes": scaled, "skins": [{"joints": list(range(1, SCALED_NODES, 2))}]}, SCALED_NODES),
    }
    for name, (doc, n_joints) in files.items():
        path = _write(tmp_path, {"asset": {"version": "2.0"}, **doc}, f"{name}.gltf")
        with watched(tmp_path, deadline_s=HIERARCHY_DEADLINE_S, memory=False):
            sk = load_gltf(path).skeleton
        assert sk.n_joints == n_joints, name
        if name == "star":  # the chain is folded into each joint: 2,000 x 1 mm up, then k along x
            world = forward_kinematics(sk, sk.rest_pose()).positions
            np.testing.assert_allclose(world[:, 1], half * 0.001, rtol=1e-12)
            np.testing.assert_allclose(np.sort(world[:, 0]), np.arange(half), atol=1e-9)
    cyclic = [{"children": [i + 1]} for i in range(CHAIN_NODES - 1)] + [{"children": [0]}]
    _refused(_write(tmp_path, {"asset": {"version": "2.0"}, "nodes": cyclic}, "cycle.gltf"), "nodes[0]",
             "cycle in the node hierarchy")


@pytest.mark.parametrize("fps", [float("nan"), float("inf"), 0.0, -30.0, "30", True])
def test_bad_fps_is_a_solver_input_error_naming_fps(shared_data: Path, fps: Any) -> None:
    with pytest.raises(SolverInputError, match="fps must be a positive finite number"):
        load_gltf(shared_data / "gltf" / "RiggedSimple.gltf", fps=fps)


# ============================================================== BVH: typed errors with the line
BVH_CASES = [
    ("Frame Time: 0.04", "Frame Time: 1e-310", 18, "frame rate 1 / Frame Time overflows"),
    ("CHANNELS 3", "CHANNELS \u00b2", 9, "channel count (digits 0-9)"),  # '²'.isdigit() but int('²') fails
    ("CHANNELS 3", "CHANNELS \uff13", 9, "channel count (digits 0-9)"),  # fullwidth 3
    ("CHANNELS 3", "CHANNELS " + "9" * 5000, 9, "channel count"),  # int() refuses > 4300 digits
    ("CHANNELS 3", "CHANNELS -3", 9, "channel count"),
    ("CHANNELS 3 Zrotation", "CHANNELS 3 Zrotation Zrotation", 9, "says 3 channels but lists 4"),
    ("Frames: 3", "Frames: \u00b2", 17, "Frames: <count>"),
    ("Frames: 3", "Frames: 3" + "0" * 5000, 17, "Frames: <count>"),
]


@pytest.mark.parametrize(("old", "new", "line", "fragment"), BVH_CASES, ids=[c[1][:24] for c in BVH_CASES])
def test_bvh_bad_counts_and_frame_time_name_file_and_line(tmp_path: Path, old: str, new: str, line: int,
                                                          fragment: str) -> None:
    good = tmp_path / "good.bvh"
    good.write_text(GOOD_BVH)
    load_bvh(good)
    path = tmp_path / "bad.bvh"
    path.write_text(GOOD_BVH.replace(old, new, 1), encoding="utf-8")
    with watched(tmp_path), pytest.raises(FileFormatError) as info:
        load_bvh(path)
    assert info.value.path == os.fspath(path) and info.value.line == line, str(info.value)
    assert fragment in str(info.value)
    assert len(str(info.value)) < 300  # a 5,000-digit line is not quoted whole


def test_bvh_bad_scale_and_up_are_solver_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "good.bvh"
    path.write_text(GOOD_BVH)
    for kw in ({"scale": float("nan")}, {"scale": 0.0}, {"scale": "big"}, {"up": "x"}):
        with pytest.raises(SolverInputError):
            load_bvh(path, **kw)


# ============================================================== a full disk names the file
class _FullDisk:
    """A binary file object whose writes fail with ENOSPC after ``room`` bytes."""

    def __init__(self, real: Any, room: int) -> None:
        self._real, self._room = real, room

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return int(self._real.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._real.close()


@pytest.mark.parametrize("ext", [".bvh", ".gltf", ".glb"])
def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          shared_data: Path, ext: str) -> None:
    real_fdopen = os.fdopen

    def fdopen(fd: int, *args: Any, **kw: Any) -> Any:
        return _FullDisk(real_fdopen(fd, *args, **kw), room=64)

    if ext == ".bvh":
        sk, clip = load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")

        def save(p: Path) -> None:
            save_bvh(p, sk, clip)
    else:
        asset = load_gltf(shared_data / "gltf" / "RiggedSimple.gltf")

        def save(p: Path) -> None:
            save_gltf(p, asset.skeleton, asset.clips)
    out = tmp_path / f"out{ext}"
    out.write_bytes(b"old")
    monkeypatch.setattr(_atomic.os, "fdopen", fdopen)
    with pytest.raises(OSError) as info:
        save(out)
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == os.fspath(out)
    assert str(out) in str(info.value) and "No space left on device" in str(info.value)
    from kinema.cli._app import one_line  # what the commands print for it

    assert one_line(info.value) == f"{out}: No space left on device"
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == [out.name]  # no temporary file left
    monkeypatch.undo()
    save(out)
    assert out.read_bytes() != b"old"


# ============================================================== fuzz
#: Fuzz cases per loader (fixed seeds); together about three seconds.
FUZZ_CASES_GLTF = 250
FUZZ_CASES_BVH = 600
_HUGE_COUNTS = [2**24, 2**31, 2**40, 10**30, 0, -1, 3, 1.5, "7", None]
_CRAFTED_URIS = ["../secret.bin", "%2e%2e%2fsecret.bin", "%2Fetc%2Fpasswd", "%2Fdev%2Fzero", "fifo.bin",
                 "link_out.bin", "a\0b", "%00", "%ff", "buf.bin", "sub/../buf.bin", "data:,abc",
                 "data:application/octet-stream;base64,AAAA", "http://127.0.0.1:1/x.bin", ""]


def _mutate_gltf(rng: np.random.Generator, doc: dict[str, Any], raw: bytes) -> bytes:
    kind = rng.integers(4)
    if kind == 0:  # byte flips, drops and truncations of the text
        return mutate_bytes(rng, raw)
    d = copy.deepcopy(doc)
    if kind == 1:  # JSON values replaced by crafted counts, or deleted
        for _ in range(rng.integers(1, 4)):
            leaves = [p for p in json_leaves(d, max_list=24) if p]
            where = leaves[int(rng.integers(len(leaves)))]
            obj: Any = d
            for k in where[:-1]:
                obj = obj[k]
            if rng.random() < 0.2 and isinstance(obj, dict):
                del obj[where[-1]]
            else:
                obj[where[-1]] = _HUGE_COUNTS[int(rng.integers(len(_HUGE_COUNTS)))]
    elif kind == 2:  # crafted accessor counts, with or without their bufferView
        acc = d["accessors"][int(rng.integers(len(d["accessors"])))]
        acc["count"] = _HUGE_COUNTS[int(rng.integers(4))]
        if rng.random() < 0.5:
            acc.pop("bufferView", None)
    else:  # crafted URIs
        d["buffers"][0]["uri"] = _CRAFTED_URIS[int(rng.integers(len(_CRAFTED_URIS)))]
        if rng.random() < 0.3:
            d["buffers"][0]["byteLength"] = _HUGE_COUNTS[int(rng.integers(len(_HUGE_COUNTS)))]
    return json.dumps(d).encode()


#: Pieces inserted into BVH text: counts int() refuses, an overflowing Frame Time, NaN, structure.
_BVH_PIECES = (b"\xc2\xb2", b"1e-310", b"nan", b"9" * 30, b"CHANNELS 3 ", b"}", b"{", b"\0", b"Frames: 99\n")


def _fuzz(folder: Path, cases: list[tuple[str, bytes]], load: Callable[[Path], Any]) -> dict[str, int]:
    outcome = {"loaded": 0, "refused": 0}
    for k, (name, data) in enumerate(cases):
        path = folder / name
        path.write_bytes(data)
        budget = DECODE_BUDGET_FLOOR + DECODE_BUDGET_FACTOR * 2 * len(data)
        with watched(folder) as w:
            try:
                load(path)
                outcome["loaded"] += 1
            except FileFormatError as err:
                assert err.path == os.fspath(path), (k, str(err))
                assert err.line is not None, (k, str(err))
                outcome["refused"] += 1
        assert w["peak"] < budget + PEAK_SLACK_BYTES, (k, w["peak"])
    return outcome


def test_fuzz_gltf_loader_is_confined_bounded_and_typed(layout: dict[str, Any], shared_data: Path) -> None:
    rng = np.random.default_rng(20261201)
    docs = {n: _doc(shared_data, n) for n in ("RiggedSimple.gltf", "RiggedFigure.gltf")}
    raws = {n: (shared_data / "gltf" / n).read_bytes() for n in docs}
    names = list(docs)
    cases = []
    for _ in range(FUZZ_CASES_GLTF):
        n = names[int(rng.integers(len(names)))]
        cases.append(("f.gltf", _mutate_gltf(rng, docs[n], raws[n])))
    outcome = _fuzz(layout["asset"], cases, load_gltf)
    print("glTF fuzz", outcome)
    assert outcome["refused"] > FUZZ_CASES_GLTF // 4 and outcome["loaded"] > 0, outcome  # the mutations bite


def test_fuzz_bvh_loader_is_bounded_and_typed(tmp_path: Path, shared_data: Path) -> None:
    rng = np.random.default_rng(20261202)
    raw = small_capture(shared_data)
    cases = [("f.bvh", mutate_bytes(rng, raw, _BVH_PIECES)) for _ in range(FUZZ_CASES_BVH)]
    outcome = _fuzz(tmp_path, cases, load_bvh)
    print("BVH fuzz", outcome)
    assert outcome["refused"] > FUZZ_CASES_BVH // 4 and outcome["loaded"] > 0, outcome
