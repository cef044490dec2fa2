"""A script for the fork tests: a process forks while another of its threads holds a lock."""

from __future__ import annotations

import textwrap


def fork_while_held(setup: str, lock: str, child: str, after: str = "") -> str:
    """Python code that runs ``setup``, then has a second thread hold ``lock`` (an expression naming a
    ``threading.Lock``) while the main thread forks.  The child runs ``child``, which sets ``ok``, and exits 0
    when ``ok`` is true, else 1; the parent lets the lock go, prints ``child <exit status>``, then runs ``after``.
    The child has no second thread, so a lock it inherited held is never released unless kinema made it anew."""
    return "\n".join([
        "import os, threading",
        textwrap.dedent(setup),
        "held, release = threading.Event(), threading.Event()",
        "def holder():",
        f"    with {lock}:",
        "        held.set()",
        "        release.wait()",
        "threading.Thread(target=holder).start()",
        "held.wait()",
        "pid = os.fork()",
        "if pid == 0:",
        textwrap.indent(textwrap.dedent(child), "    "),
        "    os._exit(0 if ok else 1)",
        "release.set()",
        'print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))',
        textwrap.dedent(after),
    ])
