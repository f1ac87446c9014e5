"""The `racefuzz` command: parses arguments, runs one subcommand, maps errors to exit codes.

Exit codes: 0 nothing found, 1 findings, 2 bad input (one line on stderr, no traceback). Only
this module turns a `RacefuzzError` into that line; any other exception is a bug in racefuzz
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from racefuzz.errors import RacefuzzError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other usage error, instead of argparse's usage block.
        raise RacefuzzError(message)


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        default="testbed",
        help="testbed, testbed:B3,B4 (bug switches), nxrt-cpu, cpu, or a name in racefuzz.toml",
    )
    p.add_argument("--config", type=Path, default=None, help="target config (racefuzz.toml)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step-timeout", type=float, default=20.0, metavar="S")
    p.add_argument("--seed", type=int, default=0, help="seed of generation and inputs")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="racefuzz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    replay = sub.add_parser("replay", help="replay schedule files or a folder of them")
    replay.add_argument("path", type=Path, help="a schedule .json file or a folder of them")
    replay.add_argument("--times", type=int, default=1, help="replays per schedule")
    replay.add_argument("--no-baseline", action="store_true", help="skip alone-classification")
    _add_target(replay)
    _add_run_options(replay)

    run = sub.add_parser("run", help="fuzz a target for some seconds (the main job)")
    _add_target(run)
    _add_run_options(run)
    from racefuzz.run_command import add_arguments

    add_arguments(run)

    shrink = sub.add_parser("shrink", help="shrink a failing schedule to a ticket bundle")
    _add_target(shrink)
    _add_run_options(shrink)
    from racefuzz.shrink_command import add_arguments as add_shrink_arguments

    add_shrink_arguments(shrink)

    report = sub.add_parser("report", help="re-render a report bundle's report.md")
    report.add_argument("path", type=Path, help="a bundle folder")

    doctor = sub.add_parser("doctor", help="check a target: libraries, devices, copies, models")
    _add_target(doctor)
    _add_run_options(doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    try:
        args = build_parser().parse_args(argv)
        from racefuzz import commands  # deferred: `--help` stays fast

        code = commands.dispatch(args)
    except RacefuzzError as e:
        print(f"racefuzz: error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("racefuzz: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)
