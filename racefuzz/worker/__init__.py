"""Code that runs inside the worker child process (and, for ops/sequencer, inside repro.py)."""

WORKER_BUG_EXIT = 70  # a worker's own code failed (a racefuzz bug), not the EP
