"""Exit statuses of the ``kinema`` command, and their help text (one place for both)."""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_MISSED", "EXIT_INTERRUPTED", "EXIT_STATUS_HELP"]

#: Exit statuses: 0 ok; 1 failed (bad input, bad file, a failed batch file); 2 bad command line;
#: 3 missed (the output was written, but a reach or a foot lock ended farther from its target than
#: --tolerance; in a batch: some file missed and none failed); 130 / 143 interrupted by Ctrl-C /
#: SIGTERM (128 + the signal number, as shells do).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

EXIT_STATUS_HELP = """\
exit status:
  0  ok
  1  failed: bad input, an unreadable or unwritable file (batch: at least one file failed)
  2  bad command line
  3  missed: the output was written, but a reach or foot lock ended farther from its
     target than --tolerance (batch: at least one file missed, none failed)
  130, 143  interrupted by Ctrl-C or SIGTERM (nothing partial is left)
"""
