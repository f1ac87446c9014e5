"""Code that runs inside the worker child process (and, for ops/sequencer, inside repro.py)."""
