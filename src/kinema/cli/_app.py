"""Argument parsing, dispatch and error handling of the ``kinema`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import _commands as cmd
from ._files import CliError
from ._ui import UI

__all__ = ["main", "build_parser", "one_line"]

PROG = "kinema"

#: Exit statuses: 0 ok, 1 failed (bad input, bad file, a failed batch file),
#: 2 bad command line, 130 interrupted (Ctrl-C; 128 + SIGINT as shells do).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

MAIN_EXAMPLES = """\
examples:
  kinema footlock --sample walk -o walk_locked.bvh    foot-lock the bundled walk, print before/after
  kinema info capture.bvh                             skeleton tree, frames, fps, units guess
  kinema convert capture.bvh capture.glb --scale 0.01 BVH in centimetres to GLB in metres
  kinema footlock capture.bvh -o capture_locked.bvh   remove foot skate
  kinema reach grab.bvh -o grab2.bvh --effector RightWrist --target 30,120,40 --frames 40:60
  kinema batch footlock captures/ -o locked/ --workers 4     a whole folder (resumes if stopped)
  kinema batch footlock captures/ -o locked/ --dask local    the same on a Dask LocalCluster
  kinema bench                                        quick built-in benchmark

Every output is written to a temporary file and renamed, never over an input;
an existing output needs --force.  Add --debug for a traceback on errors.
"""

COMMAND_EXAMPLES = {
    "info": "examples:\n  kinema info capture.bvh\n  kinema info --sample walk --json\n",
    "convert": (
        "examples:\n  kinema convert capture.bvh capture.glb           BVH to binary glTF (capsule mesh on the bones)\n"
        "  kinema convert model.gltf model.bvh --fps 30     glTF to BVH, resampled at 30 fps\n"
        "  kinema convert capture.bvh metres.bvh --scale 0.01\n"
    ),
    "footlock": (
        "examples:\n  kinema footlock --sample walk -o walk_locked.bvh\n"
        "  kinema footlock capture.bvh -o locked.bvh\n"
        "  kinema footlock capture.bvh -o locked.bvh --feet LeftFoot,RightFoot --height 4 --speed 15\n"
        "\nContacts are found from each foot's height above its ground level and its speed\n"
        "(thresholds estimated from the clip unless given) with hysteresis; each contact is\n"
        "locked at one position with two-bone IK on the leg (knee pole from the animated knee,\n"
        "foot keeping its animated orientation), the hips are lowered where a leg cannot reach,\n"
        "and the IK eases in and out around each contact.  Other joints are untouched.\n"
    ),
    "reach": (
        "examples:\n  kinema reach grab.bvh -o grab2.bvh --effector RightWrist --target 30,120,40 --frames 40:60\n"
        "  kinema reach grab.bvh -o grab2.bvh --effector RightWrist --target=-30,120,40 --frames 40:60 "
        "--chain Chest\n"
        "\nOver frames A..B the effector holds the target; before A and after B the offset\n"
        "fades over --blend frames, and frames outside that window are not touched.\n"
    ),
    "batch": (
        "examples:\n  kinema batch footlock captures/ -o locked/\n"
        "  kinema batch footlock captures/ -o locked/ --workers 4 --height 5\n"
        "  kinema batch convert captures/ -o glb/ --to glb --scale 0.01\n"
        "  kinema batch footlock captures/ -o locked/ --dask local\n"
        "  kinema batch footlock captures/ -o locked/ --dask tcp://scheduler:8786\n"
        "\nOptions after INPUT_DIR that batch does not know go to the command.  Outputs that\n"
        "exist are skipped unless --force, so a stopped batch resumes; a failed file is\n"
        "reported and the others go on (exit status 1 if any failed).\n"
    ),
    "bench": "examples:\n  kinema bench\n  kinema bench --frames 200000\n  kinema bench --suite\n",
    "sample": "examples:\n  kinema sample walk -o walk.bvh\n  kinema sample run -o run.glb\n",
}


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
                   help="show progress bars even when stderr is not a terminal")
    g.add_argument("--no-progress", dest="progress", action="store_false", default=argparse.SUPPRESS,
                   help="never show progress bars")
    return p


def _sub(subs: Any, name: str, help_text: str, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subs.add_parser(
        name, help=help_text, description=help_text, epilog=COMMAND_EXAMPLES.get(name),
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    return p


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file (.bvh, .gltf, .glb)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists (never an input)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")


def build_parser() -> argparse.ArgumentParser:
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

    p = _sub(subs, "convert", "convert between BVH and glTF/GLB (either way)", common)
    p.add_argument("input", nargs="?", metavar="IN", help="input file (.bvh, .gltf, .glb)")
    p.add_argument("output", metavar="OUT", help="output file (.bvh, .gltf, .glb)")
    p.add_argument("--sample", metavar="NAME", help="convert a bundled sample clip (then give only OUT)")
    p.add_argument("--clip", metavar="NAME", help="glTF animation to read (default: the first)")
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
    p.add_argument("input_dir", metavar="INPUT_DIR")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT_DIR", help="folder for the outputs (created)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process; with --dask local, "
                        "the cluster's workers, default 2)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on Dask: a scheduler address (tcp://HOST:PORT) or 'local' for a LocalCluster")
    p.add_argument("--pattern", action="append", metavar="GLOB",
                   help="file name pattern, repeatable (default: *.bvh, *.gltf, *.glb)")
    p.add_argument("--to", metavar="EXT", help="output format: bvh, gltf or glb (default: the input's)")
    p.add_argument("--recursive", action="store_true", help="also look in subfolders (outputs mirror them)")
    p.add_argument("--force", action="store_true", help="redo files whose output exists")

    p = _sub(subs, "bench", "time footlock and batch scaling (or run the pytest-benchmark suite)", common)
    p.add_argument("--frames", type=int, default=100_000, metavar="N",
                   help="length of the benchmark clip (the sample walk repeated; default %(default)s)")
    p.add_argument("--repeat", type=int, default=3, metavar="K", help="timed runs, best kept (default %(default)s)")
    p.add_argument("--suite", nargs="?", const="benchmarks", metavar="DIR",
                   help="run the pytest-benchmark suite in DIR (default ./benchmarks) instead")
    p.add_argument("--batch", action="store_true", help="also time batch footlock with 1 and 2 workers")

    p = _sub(subs, "sample", "write a bundled sample clip (DeepMimic humanoid) to a file", common)
    p.add_argument("name", metavar="NAME", help="walk or run")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file (.bvh, .gltf, .glb)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")

    from ..viewer._cli import HELP as VIEW_HELP  # kinema.viewer imports viser only when it serves
    from ..viewer._cli import add_view_arguments

    add_view_arguments(_sub(subs, "view", VIEW_HELP, common))
    return parser


def one_line(e: BaseException) -> str:
    """An exception as one line: its message, its type when the message is empty."""
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        text = f"{where}{e.strerror}"
    else:
        text = str(e) or type(e).__name__
    if isinstance(e, KeyError) and text.startswith(("'", '"')):
        text = f"missing key {text}"
    return " ".join(text.split())


def _dispatch(args: argparse.Namespace, extra: list[str], ui: UI) -> int:
    from . import _batch, _bench

    name = args.cmd
    if name != "batch" and extra:
        raise CliError(f"unrecognized arguments: {' '.join(extra)}")
    if name == "info":
        return cmd.run_info(args, ui)
    if name == "convert":
        if args.sample and args.input:
            raise CliError("give either IN or --sample, not both")
        if not args.sample and not args.input:
            raise CliError("convert needs IN and OUT (or --sample NAME OUT)")
        return cmd.run_convert(args, ui)
    if name == "footlock":
        return cmd.run_footlock(args, ui)
    if name == "reach":
        return cmd.run_reach(args, ui)
    if name == "batch":
        return _batch.run_batch(args, extra, ui)
    if name == "bench":
        return _bench.run_bench(args, ui)
    if name == "sample":
        return cmd.run_sample(args, ui)
    if name == "view":
        from ..viewer._cli import run_view

        return run_view(args)
    raise CliError(f"unknown command {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinema`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or bool(os.environ.get("KINEMA_DEBUG"))
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if args.cmd is None:
        parser.print_help()
        return EXIT_USAGE
    ui = UI(quiet=getattr(args, "quiet", False), progress=getattr(args, "progress", None))
    try:
        return _dispatch(args, extra, ui)
    except KeyboardInterrupt:
        if debug:
            raise
        sys.stderr.write(f"{PROG}: interrupted (no partial output was left)\n")
        return EXIT_INTERRUPTED
    except SystemExit as e:  # argparse inside a command (batch option check)
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    except Exception as e:
        if debug:
            raise
        sys.stderr.write(f"{PROG}: error: {one_line(e)}\n")
        return EXIT_FAILED
