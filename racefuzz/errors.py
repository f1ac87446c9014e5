"""The one root error class for bad input.

Only the CLI turns a `RacefuzzError` into one line on stderr and exit code 2; anything else
that escapes is a bug in racefuzz and keeps its traceback.
"""


class RacefuzzError(Exception):
    """A problem with what the user gave racefuzz: a file, a library, a flag, a config."""


class InternalError(Exception):
    """racefuzz's own code failed (in the worker or here): a bug in racefuzz, exit 3, never a
    finding. The message carries the traceback."""
