"""A command's cold first run: one solver's kernels compiled in a second process (kinema._precompile).

The worker compiles into numba's cache; this process then loads that code instead of compiling it
(the same compiled code, so the same numbers), and no worker outlives its parent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from _cli import default_sigint
from _fork import fork_while_held
from kinema import _precompile

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing compiles without JIT")


def _env(cache: Path) -> dict[str, str]:
    """This environment with ``cache`` for numba, compiling every kernel it runs (a foot lock of the sample walk
    would otherwise run the plain kernels and compile nothing: kinema._kernels._tier)."""
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["KINEMA_COMPILE"] = "always"
    return env


def _run(code: str, cache: Path, timeout: float = 240.0, args: tuple[str, ...] = (), script: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter (``_env(cache)``) and return its output; it must succeed.  ``script``:
    run it from that file instead of ``-c`` (numba caches only functions defined in a file)."""
    if script is None:
        cmd = [sys.executable, "-c", textwrap.dedent(code), *args]
    else:
        script.write_text(textwrap.dedent(code))
        cmd = [sys.executable, str(script), *args]
    out = subprocess.run(cmd, env=_env(cache), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


#: The compiled functions a foot lock of the sample walk compiles, by module, in a fresh process.
COUNT_COMPILES = """
    import collections, sys
    from numba.core import event
    compiled = collections.Counter()
    class Count(event.Listener):
        def on_start(self, ev):
            compiled[ev.data["dispatcher"].py_func.__module__] += 1
        def on_end(self, ev):
            pass
    event.register("numba:compile", Count())
    from kinema import mocap, samples
    sk, walk = samples.humanoid(), samples.clip("walk")
    if sys.argv[1] == "footlock":
        mocap.footlock(sk, walk)
    else:
        mocap.reach(sk, walk, "right_wrist", [0.85, 1.1, 0.35], (16, 24))
    print(compiled.get("kinema._kernels.two_bone", 0), sum(compiled.values()))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_compiles_what_the_foot_lock_loads(tmp_path: Path) -> None:
    # The group's cache check reads numba's index file name: it is False on an empty cache and True after
    # the worker (a numba that names its files otherwise fails here, not silently).
    cache = tmp_path / "cache"
    probe = "from kinema import _precompile; print(_precompile.cached('two_bone'))"
    assert _run(probe, cache).split() == ["False"]
    worker = subprocess.run(_precompile.worker_command("two_bone"), env=_env(cache), capture_output=True, text=True,
                            timeout=240)
    assert worker.returncode == 0, worker.stderr
    assert _run(probe, cache).split() == ["True"]
    # A foot lock and a reach after it compile other kernels (contacts, FK, BVH), but not one two-bone
    # function: they load every one the worker compiled (the commands that start it: PRECOMPILED).
    from kinema.cli._commands import PRECOMPILED

    assert set(PRECOMPILED) == {"footlock", "reach"}
    for command in PRECOMPILED:  # each in a copy of the worker's cache (the first would compile for the second)
        shutil.copytree(cache, tmp_path / command)
        two_bone, total = map(int, _run(COUNT_COMPILES, tmp_path / command, args=(command,)).split())
        assert two_bone == 0 and total > 0, command


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            from kinema import _precompile
            assert _precompile.start("two_bone")
            print(_precompile._workers["two_bone"].pid, flush=True)
            time.sleep(60)
        """)], env=_env(tmp_path / "cache"), stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    time.sleep(1.0)  # the worker is compiling now
    assert _alive(worker)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5.0  # its watchdog polls every PARENT_POLL_S
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)


def test_no_worker_where_it_cannot_pay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[object] = []
    monkeypatch.setattr(_precompile.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(_precompile, "_cpus", lambda: 1)
    monkeypatch.setattr(_precompile, "cached", lambda group: False)
    assert _precompile.start("two_bone") is False  # one CPU: nothing to overlap with
    monkeypatch.setattr(_precompile, "_cpus", lambda: 2)
    monkeypatch.setattr(_precompile, "cached", lambda group: True)
    assert _precompile.start("two_bone") is False  # compiled already: this process loads it
    assert started == []

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(_precompile, "cached", lambda group: False)
    monkeypatch.setattr(_precompile.subprocess, "Popen", refused)
    assert _precompile.start("two_bone") is False  # no process could start: this one compiles it all
    assert "two_bone" not in _precompile._workers
    with pytest.raises(KeyError, match="two_bone"):
        _precompile.start("nope")
    _precompile.wait("two_bone")  # none running: returns at once


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_exit_stops_a_running_worker(tmp_path: Path) -> None:
    # A command that ends (or fails) before it needs the kernels leaves no worker behind: stop_all runs at exit.
    out = _run("""
        from kinema import _precompile
        assert _precompile.start("two_bone")
        print(_precompile._workers["two_bone"].pid)
    """, tmp_path / "cache")
    assert not _alive(int(out))


def test_the_spinner_says_compiling_while_this_process_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # Waiting for the worker is compiling as far as a command's spinner goes (its compile notice).
    from kinema.cli._ui import compile_notice

    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    monkeypatch.setitem(_precompile._workers, "two_bone", stand_in)
    events: list[bool] = []
    with compile_notice(events.append):
        _precompile.wait("two_bone")
    assert stand_in.poll() == 0 and events == [True, False]
    assert "two_bone" not in _precompile._workers


@pytest.mark.skipif(not Path(sys.executable).with_name("kinema").exists(), reason="needs the kinema console script")
def test_the_worker_never_imports_from_the_working_folder(tmp_path: Path) -> None:
    """``kinema footlock`` run in a folder of untrusted files: a ``kinema`` package there is not what its worker
    imports (``python -m`` would have put the folder first on the path and run that package's code)."""
    marker = tmp_path / "ran"
    planted = tmp_path / "work" / "kinema"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = _env(tmp_path / "cache")  # a cold cache, compiling: the worker starts
    res = subprocess.run([str(Path(sys.executable).with_name("kinema")), "footlock", "--sample", "walk", "-o",
                          str(tmp_path / "out.bvh")], cwd=planted.parent, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    assert _precompile.worker_command("two_bone")[1] == "-c"  # the folder-proof form the command above used


def test_warmup_says_which_steps_a_second_process_compiled(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Their seconds in the table are this process's load of what the worker compiled: the rows say so.
    from kinema.cli import _commands, main

    calls: list[tuple[object, object]] = []

    def warm(only: object = None, skip: object = ()) -> list[tuple[str, float]]:
        calls.append((only, skip))
        names = sorted(_commands.SECOND_PROCESS_STEPS) if only is not None else ["solve_ccd"]
        return [(name, 0.5) for name in names]

    monkeypatch.setattr(_precompile, "start", lambda group: group == "warmup")
    monkeypatch.setattr(_precompile, "wait", lambda group: None)
    monkeypatch.setattr(_commands, "warm_kernels", warm)
    assert main(["warmup", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert calls == [(None, _commands.SECOND_PROCESS_STEPS), (_commands.SECOND_PROCESS_STEPS, ())]
    assert "\nsolve_ccd " in out and "solve_ccd (compiled" not in out
    for name in _commands.SECOND_PROCESS_STEPS:
        assert f"\n{name} (compiled by a second process) " in out


def test_a_clip_too_short_to_compile_for_starts_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A foot lock or reach starts the worker only when its clip is long enough to run compiled kernels: the
    sample walk runs the plain kernels (kinema._kernels._tier) and compiles nothing."""
    from types import SimpleNamespace

    import numpy as np

    from kinema._kernels import _tier
    from kinema.cli import _commands

    started: list[str] = []
    monkeypatch.setattr(_precompile, "start", started.append)
    monkeypatch.delenv("KINEMA_COMPILE", raising=False)
    monkeypatch.setattr(_tier._Spent, "seconds", 0.0)
    monkeypatch.setattr(_tier._Spent, "always", False)

    def motion(frames: int) -> SimpleNamespace:
        pose = SimpleNamespace(translations=np.empty((frames, 20, 3)), rotations=np.empty((frames, 20, 4)),
                               scales=np.empty((frames, 20, 3)))
        return SimpleNamespace(clip=SimpleNamespace(pose=pose))

    per_frame = 20 * 10
    short = motion(_tier.INTERPRET_MAX_ELEMENTS // per_frame)
    long = motion(_tier.INTERPRET_MAX_ELEMENTS // per_frame + 1)
    _commands._start_precompile("two_bone", short)  # type: ignore[arg-type]
    assert started == []
    _commands._start_precompile("two_bone", long)  # type: ignore[arg-type]
    assert started == ["two_bone"]
    monkeypatch.setenv("KINEMA_COMPILE", "always")
    _commands._start_precompile("two_bone", short)  # type: ignore[arg-type]
    assert started == ["two_bone", "two_bone"]


def test_a_command_that_ends_while_its_kernels_compile_says_how_to_compile_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The worker compiling what a command ran plain stops with the command (kinema._kernels._tier): the command
    says so on stderr, and how to compile the kernels once; nothing is said when no such worker runs, or with
    --quiet."""
    from kinema.cli import main

    monkeypatch.setattr(_precompile, "running", lambda group: group == "in_use")
    assert main(["sample", "walk", "-o", str(tmp_path / "a.bvh")]) == 0
    err = capsys.readouterr().err
    assert "this run's kernels ran as plain Python (not compiled yet); `kinema warmup` compiles them" in err
    assert main(["sample", "walk", "-o", str(tmp_path / "b.bvh"), "--quiet"]) == 0
    assert "plain Python" not in capsys.readouterr().err
    monkeypatch.setattr(_precompile, "running", lambda group: False)
    assert main(["sample", "walk", "-o", str(tmp_path / "c.bvh")]) == 0
    assert "plain Python" not in capsys.readouterr().err


# ------------------------------------------------------ no temporary file left in numba's cache
#: A script that compiles one cached function with kinema's numba; numba's rename of each written cache file
#: waits ``WAIT`` s after saying ``writing`` (the temporary file complete, not yet renamed), and ``WATCH`` set
#: starts the precompile worker's watchdog then, for a parent that is gone (a pid that is not its parent).
SLOW_WRITE = """
    import os, sys, threading, time
    import numba
    from kinema import _precompile
    from kinema._kernels import _jit  # numba's cache writes made whole, in kinema's cache folder

    numba.config.CACHE_DIR = _jit._CACHE_DIR  # (this script's function is cached there)
    real_replace = os.replace
    def slow_replace(src, dst):
        print("writing", flush=True)
        if os.environ.get("WATCH"):
            threading.Thread(target=_precompile._watch_parent, args=(-1,), daemon=True).start()
        time.sleep(float(os.environ["WAIT"]))
        real_replace(src, dst)
    os.replace = slow_replace

    @numba.njit(cache=True)
    def add_one(x):
        return x + 1

    add_one(1)
    print("compiled", flush=True)
    time.sleep(10.0)
    print("done", flush=True)
"""


def _slow_write(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[str], Path]:
    """Start :data:`SLOW_WRITE` (its cache in ``tmp_path/cache``) and wait until it says ``writing``."""
    script = tmp_path / "slow_write.py"  # (numba caches only functions defined in a file)
    script.write_text(textwrap.dedent(SLOW_WRITE))
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, str(script)], env={**_env(cache), "WAIT": "1.0", **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "writing\n", (line, proc.stderr.read() if proc.stderr else "")
    return proc, cache


def _cache_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.is_file())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_cache_write_waits_for_its_rename(tmp_path: Path, sig: int) -> None:
    # Without the wait the signal ends the script in the middle of the write (SIGTERM's default action, or a
    # KeyboardInterrupt that numba's writer does not clean up after): the temporary file stays in the cache.
    proc, cache = _slow_write(tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -sig, err  # the signal acted as it would have (SIGINT: an uncaught Ctrl-C)
    assert "compiled" not in out  # ... once the file was written, before the next one
    files = _cache_files(cache)
    assert not [f for f in files if ".tmp." in f], files
    assert [f for f in files if f.endswith((".nbi", ".nbc"))], files  # the file being written, renamed whole
    if sig == signal.SIGINT:
        assert err.rstrip().endswith("KeyboardInterrupt")


def test_the_watchdog_ends_a_worker_after_its_cache_write(tmp_path: Path) -> None:
    proc, cache = _slow_write(tmp_path, WATCH="1")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "done" not in out  # the watchdog ended it (within 10 s of the compile)
    files = _cache_files(cache)
    assert not [f for f in files if ".tmp." in f], files
    assert [f for f in files if f.endswith((".nbi", ".nbc"))], files


#: Three files in a cache subfolder: an old numba temporary file (a killed process's), a fresh one (a write in
#: progress elsewhere) and an old file of another name; then a compile that writes to the cache.
STALE_TEMPS = """
    import os, sys, time
    import numba
    from kinema._kernels import _jit

    folder = os.path.join(_jit._CACHE_DIR, "elsewhere")
    os.makedirs(folder)
    names = ["m.f-1.py311.nbi.tmp.0123456789abcdef", "m.f-1.py311.nbc.tmp.fedcba9876543210", "notes.tmp.txt"]
    for name in names:
        open(os.path.join(folder, name), "w").close()
    hour_ago = time.time() - 3600
    for name in (names[0], names[2]):
        os.utime(os.path.join(folder, name), (hour_ago, hour_ago))
    numba.config.CACHE_DIR = _jit._CACHE_DIR

    @numba.njit(cache=True)
    def add_one(x):
        return x + 1

    add_one(1)
    print(sorted(os.listdir(folder)))
"""


def test_the_first_cache_write_removes_stale_temporary_files(tmp_path: Path) -> None:
    out = _run(STALE_TEMPS, tmp_path / "cache", 120, script=tmp_path / "stale_temps.py")
    # the old temporary file is gone; the fresh one (perhaps still being written) and the other name stay
    assert out.strip() == repr(["m.f-1.py311.nbc.tmp.fedcba9876543210", "notes.tmp.txt"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_process_forked_during_a_cache_write_can_write_to_the_cache(tmp_path: Path) -> None:
    # Another thread holds the cache-write lock when this process forks: the child has no such thread, so the
    # lock it inherited would never be released (its next cache write would hang for ever).
    out = _run(fork_while_held("from kinema._kernels import _jit", "_jit.CACHE_WRITE_LOCK",
                               "ok = _jit.CACHE_WRITE_LOCK.acquire(timeout=5)"), tmp_path / "cache")
    assert out.strip() == "child 0"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_has_none_of_its_parents_workers(tmp_path: Path) -> None:
    # A worker of the parent's runs, and another thread holds the workers' lock when the parent forks: the child
    # neither waits for that lock for ever nor takes the parent's worker for its own.
    out = _run(fork_while_held("""
        import subprocess, sys
        from kinema import _precompile
        _precompile._workers["in_use"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    """, "_precompile._lock", """
        ok = _precompile._lock.acquire(timeout=5)
        _precompile._lock.release()
        ok = ok and not _precompile.running("in_use")
    """, """
        print("parent's worker", _precompile.running("in_use"))
        _precompile.stop_all()
    """), tmp_path / "cache")
    assert out.split() == ["child", "0", "parent's", "worker", "True"]


#: A function of the user's own cached where numba caches it, then one cached in kinema's folder; prints how many
#: cache writes took kinema's cache-write lock for each.
OTHER_NUMBA = """
    import threading
    import numba
    from kinema._kernels import _jit

    taken = []
    class Lock:
        def __enter__(self):
            taken.append(1)
        def __exit__(self, *exc):
            return False
    _jit.CACHE_WRITE_LOCK = Lock()

    @numba.njit(cache=True)
    def users_own(x):
        return x + 1

    users_own(1)
    print("user's own", len(taken))
    numba.config.CACHE_DIR = _jit._CACHE_DIR

    @numba.njit(cache=True)
    def kinemas(x):
        return x + 2

    kinemas(1)
    print("kinema's", len(taken))
"""


def test_only_kinema_s_cache_folder_gets_whole_writes(tmp_path: Path) -> None:
    # Other numba code in the process (the user's own cached functions) is written the way numba writes it.
    out = _run(OTHER_NUMBA, tmp_path / "cache", 120, script=tmp_path / "other_numba.py")
    assert out.split("\n")[0] == "user's own 0"
    assert out.split("\n")[1] == "kinema's 2"  # its data file and its index
