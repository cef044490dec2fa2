"""The ``kinema`` command line's parser: commands, options, help texts and exit statuses.

One place for all of it: the single commands, ``batch`` (which checks a
command's options with this parser before any work) and the batch workers
(which parse the same options per file) all call :func:`build_parser`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import _commands as cmd
from ._demo import EXAMPLES as DEMO_EXAMPLES
from ._demo import HELP as DEMO_HELP
from ._demo import add_demo_arguments
from ._status import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_MISSED, EXIT_OK, EXIT_STATUS_HELP, EXIT_USAGE

__all__ = ["PROG", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_MISSED", "EXIT_INTERRUPTED", "build_parser",
           "join_negative_values"]

PROG = "kinema"

MAIN_EXAMPLES = """\
examples:
  kinema footlock --sample walk -o out/walk_locked.bvh --force   foot-lock the bundled walk, print before/after
  kinema info capture.bvh                             skeleton tree, frames, fps, units guess
  kinema info capture.bvh --joints --frame 40         every joint's world position at frame 40 (file units)
  kinema convert capture.bvh capture.glb --scale 0.01 BVH in centimetres to GLB in metres
  kinema footlock capture.bvh -o capture_locked.bvh   remove foot skate
  kinema reach grab.bvh -o grab2.bvh --effector RightWrist --target -30,120,40 --frames 40:60
  kinema batch footlock captures/ -o locked/ --workers 4     a whole folder (resumes if stopped)
  kinema batch footlock captures/ -o locked/ --dask local    the same on a Dask LocalCluster
  kinema warmup                                       compile every kernel now (first use is then fast)
  kinema bench                                        benchmark suite side by side with peers
  kinema demo --list                                  the seed demos (viewer, or --headless PNG frames)

Every output is written to a temporary file and renamed, never over an input;
an existing output needs --force; a missing output folder is created.
Add --debug for a traceback on errors.

""" + EXIT_STATUS_HELP

COMMAND_EXAMPLES = {
    "info": (
        "examples:\n  kinema info capture.bvh\n  kinema info --sample walk --json\n"
        "  kinema info --sample walk --joints --frame 20     world positions: pick a reach target near one\n"
    ),
    "convert": (
        "examples:\n  kinema convert capture.bvh capture.glb           BVH to binary glTF (capsule mesh on the bones)\n"
        "  kinema convert model.gltf model.bvh --fps 30     glTF to BVH, resampled at 30 fps\n"
        "  kinema convert capture.bvh metres.bvh --scale 0.01\n"
        "\n'seconds' in --json is the command's wall time (reading, converting and writing).\n"
    ),
    "footlock": (
        "examples:\n  kinema footlock --sample walk -o out/walk_locked.bvh --force\n"
        "  kinema footlock capture.bvh -o locked.bvh\n"
        "  kinema footlock capture.bvh -o locked.bvh --feet LeftFoot,RightFoot --height 4 --speed 15\n"
        "\nContacts are found from each foot's height above its ground level and its speed\n"
        "(thresholds estimated from the clip unless given) with hysteresis; each contact is\n"
        "locked at one position with two-bone IK on the leg (knee pole from the animated knee,\n"
        "foot keeping its animated orientation), the hips are lowered where a leg cannot reach,\n"
        "and the IK eases in and out around each contact.  Other joints are untouched.\n"
        "The report gives skate and joint speeds of the joints footlock changed (the legs),\n"
        "contact frames per foot, and exits 3 ('missed') when a foot ends farther than\n"
        "--tolerance from its lock.  Footlock works Y up: a file whose bones run mostly\n"
        "along another axis (a Z-up capture) is written with a warning on stderr.\n\n" + EXIT_STATUS_HELP
    ),
    "reach": (
        "examples:\n  kinema info --sample walk --joints --frame 20     where the joints are (pick a target near one)\n"
        "  kinema reach --sample walk -o out/reach.bvh --effector right_wrist --target 0.85,1.1,0.35 "
        "--frames 16:24\n"
        "  kinema reach grab.bvh -o grab2.bvh --effector RightWrist --target -30,120,40 --frames 40:60 --chain Chest\n"
        "\nOver frames A..B the effector holds the target; before A and after B the offset\n"
        "fades over --blend frames, and frames outside that window are not touched.\n"
        "A target the arm cannot reach is written anyway, reported as 'missed' with the\n"
        "distance, and the exit status is 3.\n\n" + EXIT_STATUS_HELP
    ),
    "batch": (
        "arguments passed on:\n"
        "  Every option after INPUT_DIR that batch does not know goes to COMMAND, for every file:\n"
        "  footlock: --feet --height --speed --ground --hysteresis --min-contact --ease --no-hips --keep-length "
        "--tolerance --clip\n"
        "  reach:    --effector --target --frames --blend --chain --free-orientation --tolerance --clip\n"
        "  convert:  --scale --fps --mesh --clip\n"
        "  (see kinema COMMAND --help).  batch sets IN, -o and --force of each file itself.\n"
        "\nexamples:\n  kinema batch footlock captures/ -o locked/\n"
        "  kinema batch footlock captures/ -o locked/ --workers 4 --height 5\n"
        "  kinema batch convert captures/ -o glb/ --to glb --scale 0.01\n"
        "  kinema batch footlock captures/ -o locked/ --dask local\n"
        "  kinema batch footlock captures/ -o locked/ --dask tcp://scheduler:8786 --dask-timeout 10\n"
        "\nOutputs that exist are skipped unless --force, so a stopped batch resumes; a file\n"
        "that fails (bad input, or an output that cannot be written) is reported and the\n"
        "others go on.  The table gives each file's status (ok, missed, FAILED, skipped);\n"
        "the last line counts them.\n\n" + EXIT_STATUS_HELP
    ),
    "demo": DEMO_EXAMPLES,
    "bench": (
        "examples:\n  kinema bench                                  the whole suite, with its peers\n"
        "  kinema bench --quick --json bench.json --plot bench.png\n"
        "  kinema bench --frames 200000                  footlock alone on 200000 frames\n"
        "  kinema bench --suite                          the pytest-benchmark suite (source tree)\n"
        "\n--plot FILE.png writes FILE.png (accuracy against time per solve on the 10-bone chain) and\n"
        "FILE-throughput.png (solves per second against batch size).\n"
    ),
    "sample": "examples:\n  kinema sample walk -o walk.bvh\n  kinema sample run -o run.glb\n",
    "warmup": (
        "Compiles (or loads from numba's cache) every kernel kinema has: the solvers, forward\n"
        "kinematics and the BVH reader, each called once on a tiny input.  Run it once after\n"
        "installing so that the first real command does not wait for the compiler.\n"
    ),
}

#: Options whose value may start with a minus sign (``--target -30,120,40``): argparse would
#: take ``-30,120,40`` for an option, so :func:`join_negative_values` writes ``--target=-30,...``.
NEGATIVE_VALUE_OPTIONS = ("--target", "--ground")

_NUMBER_START = re.compile(r"^-(\d|\.\d)")


def join_negative_values(argv: Sequence[str]) -> list[str]:
    """``[..., "--target", "-30,120,40"]`` -> ``[..., "--target=-30,120,40"]`` (the form argparse reads)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in NEGATIVE_VALUE_OPTIONS and i + 1 < len(argv) and _NUMBER_START.match(argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (and a pointer to --help) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(EXIT_USAGE)


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("general")
    # SUPPRESS: a subcommand's copy must not reset a value given before the subcommand.
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="print nothing on success")
    g.add_argument("--progress", dest="progress", action="store_true", default=argparse.SUPPRESS,
                   help="show progress even when stderr is not a terminal (there: as plain lines)")
    g.add_argument("--no-progress", dest="progress", action="store_false", default=argparse.SUPPRESS,
                   help="never show progress bars")
    return p


def _sub(subs: Any, name: str, help_text: str, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subs.add_parser(
        name, help=help_text, description=help_text, epilog=COMMAND_EXAMPLES.get(name),
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    return p


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output file (.bvh, .gltf, .glb); a missing folder is created")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists (never an input)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")


def build_parser() -> argparse.ArgumentParser:
    """The ``kinema`` parser (subcommands ``info``, ``convert``, ``footlock``, ``reach``, ``batch``, ...)."""
    common = _common()
    parser = _Parser(
        prog=PROG,
        description="kinema: inverse kinematics for animation files. Clean up motion capture with IK "
                    "(foot locking, re-aimed reaches), convert BVH and glTF, run whole folders on a "
                    "process pool or Dask.",
        epilog=MAIN_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"kinema {__version__}")
    subs = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    p = _sub(subs, "info", "show a file's skeleton tree, frames, fps and a units guess", common)
    cmd.add_input(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--joints", action="store_true",
                   help="print every joint's world position at --frame, in the file's units")
    p.add_argument("--frame", type=int, default=0, metavar="N", help="frame for --joints (0-based; default 0)")

    p = _sub(subs, "convert", "convert between BVH and glTF/GLB (either way)", common)
    p.add_argument("input", nargs="?", metavar="IN", help="input file (.bvh, .gltf, .glb)")
    p.add_argument("output", metavar="OUT", help="output file (.bvh, .gltf, .glb); a missing folder is created")
    p.add_argument("--sample", metavar="NAME", help="convert a bundled sample clip (then give only OUT)")
    p.add_argument("--clip", metavar="NAME", help="animation to read: a glTF file's by name (default: the first); "
                   "a BVH file's one is named after the file")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists (never an input)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    cmd.add_convert_options(p)

    p = _sub(subs, "footlock", "remove foot skate: lock foot contacts with two-bone leg IK", common)
    cmd.add_input(p)
    _output(p)
    cmd.add_footlock_options(p)

    p = _sub(subs, "reach", "re-aim a reach: the effector holds a new target over frames A:B", common)
    cmd.add_input(p)
    _output(p)
    cmd.add_reach_options(p)

    p = _sub(subs, "batch", "run footlock, reach or convert over every matching file in a folder", common)
    p.add_argument("command", choices=cmd.FILE_COMMANDS, metavar="COMMAND",
                   help=f"one of: {', '.join(cmd.FILE_COMMANDS)}")
    p.add_argument("input_dir", metavar="INPUT_DIR",
                   help="folder of input files: every file matching --pattern in it (and in its "
                        "subfolders with --recursive) is one job; hidden files are left out")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT_DIR",
                   help="folder for the outputs (created if missing, and removed again if nothing was written); "
                        "each output has its input's name (and relative folder), with the extension --to")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process; with --dask local, "
                        "the cluster's workers, default 2)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on Dask: a scheduler address (tcp://HOST:PORT) or 'local' for a LocalCluster")
    p.add_argument("--dask-timeout", type=cmd.positive_number, default=cmd.DASK_CONNECT_TIMEOUT_S, metavar="S",
                   help="seconds to wait for the Dask scheduler before giving up (default %(default)s)")
    p.add_argument("--pattern", action="append", metavar="GLOB",
                   help="file name pattern, repeatable (default: *.bvh, *.gltf, *.glb)")
    p.add_argument("--to", metavar="EXT", help="output format: bvh, gltf or glb (default: the input's)")
    p.add_argument("--recursive", action="store_true", help="also look in subfolders (outputs mirror them)")
    p.add_argument("--force", action="store_true", help="redo files whose output exists")

    p = _sub(subs, "bench", "run the benchmark suite side by side with its peers (or time footlock alone)", common)
    p.add_argument("--quick", action="store_true", help="smaller problems, fewer repeats (under 10 s with "
                   "compiled kernels; a first run compiles them: about 2 minutes on 2 cores)")
    p.add_argument("--json", metavar="FILE", help="also write the suite's rows to FILE (JSON)")
    p.add_argument("--plot", metavar="FILE", help="draw accuracy against time per solve to FILE (a .png name) "
                   "and throughput against batch size to FILE with -throughput before its suffix (needs "
                   "matplotlib)")
    p.add_argument("--force", action="store_true", help="replace an existing --json or --plot FILE")
    p.add_argument("--frames", type=int, default=None, metavar="N",
                   help="time footlock alone on a clip of N frames (the sample walk repeated; 100000 with --batch)")
    p.add_argument("--repeat", type=int, default=None, metavar="K",
                   help="timed runs (footlock alone: best of K, default 3; the suite: median of K, default 7, "
                        "3 with --quick)")
    p.add_argument("--suite", nargs="?", const="benchmarks", metavar="DIR",
                   help="run the pytest-benchmark suite in DIR (default ./benchmarks) instead")
    p.add_argument("--batch", action="store_true", help="time footlock alone and batch footlock with 1 and 2 workers")

    p = _sub(subs, "sample", "write a bundled sample clip (DeepMimic humanoid) to a file", common)
    p.add_argument("name", metavar="NAME", help="walk or run")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file (.bvh, .gltf, .glb)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")

    _sub(subs, "warmup", "compile every kernel now, so that first use is fast (prints how long it took)", common)

    from ..viewer._cli import HELP as VIEW_HELP  # kinema.viewer imports viser only when it serves
    from ..viewer._cli import add_view_arguments

    add_view_arguments(_sub(subs, "view", VIEW_HELP, common))
    add_demo_arguments(_sub(subs, "demo", DEMO_HELP, common))
    return parser
