"""The one root error class for bad input.

Only the CLI turns a `RacefuzzError` into one line on stderr and exit code 2; anything else
that escapes is a bug in racefuzz and keeps its traceback.
"""

import sys
import traceback

BUG_EXIT = 3  # the command's exit code for a bug in racefuzz itself


class RacefuzzError(Exception):
    """A problem with what the user gave racefuzz: a file, a library, a flag, a config."""


class InternalError(Exception):
    """racefuzz's own code failed (in the worker or here): a bug in racefuzz, exit 3, never a
    finding. The message carries the traceback."""


def report_internal(error: BaseException | str) -> None:
    """racefuzz's own failure on stderr: what it is, and the traceback to attach to a report."""
    text = error if isinstance(error, str) else "".join(traceback.format_exception(error))
    print(
        "racefuzz: internal error (a bug in racefuzz, not in the EP; please report it with "
        "this traceback):",
        file=sys.stderr,
    )
    print(text.rstrip(), file=sys.stderr)
