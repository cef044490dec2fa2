"""Helpers shared by the command-line tests."""

from __future__ import annotations

import signal

import pytest

from kinema.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """Run ``kinema ARGV...`` in this process; ``(exit status, stdout, stderr)``."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The one non-blank line of ``err`` (asserting there is exactly one, and no traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def default_sigint() -> None:
    """A ``preexec_fn`` for a child that a test stops with SIGINT: the child starts with SIGINT's default action,
    whatever this process has.  A process started with ``&`` by a non-interactive shell (a CI job run in the
    background) ignores SIGINT and its children inherit that; Python then installs no ``KeyboardInterrupt``
    handler, and the child would go on as if no Ctrl-C had come."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
