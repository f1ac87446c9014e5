"""The `racefuzz` command: parses arguments, runs one subcommand, maps errors to exit codes.

Only this module's DESCRIPTION reaches `racefuzz --help`; this docstring is for its readers.

Exit codes: 0 nothing new found, 1 new findings, 2 bad input (one line on stderr, no
traceback), 3 a bug in racefuzz itself (its traceback, to report). Only this module turns a
`RacefuzzError` into that line and any other exception into exit 3.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from racefuzz.errors import BUG_EXIT, RacefuzzError, report_internal


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other usage error, instead of argparse's usage block.
        raise RacefuzzError(message)


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        default=None,
        help="testbed (the default), testbed:B3,B4 (bug switches), nxrt-cpu, webgpu-cpu, "
        "openvino, ggml (after `racefuzz setup`), webgpu, nxrt-cuda, cuda, tensorrt, cpu, or a "
        "name in racefuzz.toml; `run --resume` defaults to the campaign's own",
    )
    p.add_argument("--config", type=Path, default=None, help="target config (racefuzz.toml)")


def _models_arg(text: str) -> str:
    # Checked as parsed, made canonical (zoo expanded, paths absolute), so that a resume
    # compares like with like; imported here only when the option is given.
    from racefuzz.targets.models import chosen

    return ",".join(chosen(text))


def _add_models(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models",
        type=_models_arg,
        default=None,
        metavar="NAME,NAME",
        help="replace the target's models: built-in names, zoo (every zoo model), .onnx paths",
    )


DESCRIPTION = (
    "Fuzz the orders of calls several ONNX Runtime sessions make into a plugin execution "
    "provider, find what breaks, and shrink each failure to a minimal schedule with a "
    "stand-alone repro.py. Start with `racefuzz run --seconds 60` (the built-in testbed EP) or "
    "`racefuzz doctor --target NAME`."
)
EPILOG = "exit codes: 0 nothing new, 1 new findings, 2 bad input, 3 a bug in racefuzz"


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--step-timeout",
        type=float,
        default=20.0,
        metavar="S",
        help="seconds one step may take before it is a hang (20)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of generation and inputs")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="racefuzz", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    replay = sub.add_parser("replay", help="replay schedule files or a folder of them")
    replay.add_argument("path", type=Path, help="a schedule .json file or a folder of them")
    replay.add_argument("--times", type=int, default=1, help="replays per schedule")
    replay.add_argument("--no-baseline", action="store_true", help="skip alone-classification")
    _add_target(replay)
    _add_models(replay)
    _add_run_options(replay)

    run = sub.add_parser("run", help="fuzz a target for some seconds (the main job)")
    _add_target(run)
    _add_models(run)
    _add_run_options(run)
    from racefuzz.cli.run_command import add_arguments

    add_arguments(run)

    shrink = sub.add_parser("shrink", help="shrink a failing schedule to a ticket bundle")
    _add_target(shrink)
    _add_run_options(shrink)
    from racefuzz.cli.shrink_command import add_arguments as add_shrink_arguments

    add_shrink_arguments(shrink)

    report = sub.add_parser("report", help="re-render a report bundle's report.md")
    report.add_argument("path", type=Path, help="a bundle folder")

    setup = sub.add_parser("setup", help="fetch what a real-EP target needs into the cache")
    setup.add_argument("name", metavar="TARGET", help="webgpu-cpu, openvino or ggml")

    doctor = sub.add_parser("doctor", help="check a target: libraries, devices, copies, models")
    _add_target(doctor)
    _add_models(doctor)
    _add_run_options(doctor)
    return parser


def _version() -> str:
    from importlib import metadata

    from racefuzz import __version__

    try:
        ort = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        ort = "not installed"
    return f"racefuzz {__version__} (onnxruntime {ort})"


def main(argv: Sequence[str] | None = None) -> None:
    try:
        args = build_parser().parse_args(argv)
        from racefuzz.cli import commands  # deferred: `--help` stays fast

        code = commands.dispatch(args)
    except RacefuzzError as e:
        print(f"racefuzz: error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("racefuzz: interrupted", file=sys.stderr)
        code = 130
    except Exception as e:  # racefuzz's own bug: never passed off as a finding or bad input
        report_internal(e)
        code = BUG_EXIT
    sys.exit(code)
