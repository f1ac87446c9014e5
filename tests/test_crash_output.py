"""What a crashing worker leaves behind stays small: threads that fault at once get one Python
fault report (not faulthandler catching its own re-raise until the stack runs out), no core
file, and the parent reads at most a capped head and tail of any stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from racefuzz.execute import executor, native_stack

FAULT_TOGETHER = """
import ctypes, faulthandler, resource, sys, threading
faulthandler.enable(file=sys.stderr, all_threads=True)
ctypes.CDLL(sys.argv[1]).racefuzz_crashtrace_install()
from racefuzz.worker.main import no_core_dumps
no_core_dumps()
print(resource.getrlimit(resource.RLIMIT_CORE)[0], flush=True)
barrier = threading.Barrier(16)
def fault():
    barrier.wait()
    ctypes.memmove(8, 16, 8)  # every thread dereferences a bad pointer at once
threads = [threading.Thread(target=fault) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_threads_faulting_together_give_one_report_and_no_core() -> None:
    tracer = native_stack.tracer_library()
    if tracer is None:
        pytest.skip("no C compiler for the crash tracer")
    for _ in range(6):  # the loop it guards against came 1 time in 8 before
        done = subprocess.run(
            [sys.executable, "-c", FAULT_TOGETHER, str(tracer)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode < 0 and done.stdout.strip() == "0", done.stderr[-2000:]
        assert done.stderr.count("Fatal Python error") == 1, len(done.stderr)
        assert native_stack.HEADER in done.stderr


def test_a_huge_stderr_is_read_as_its_head_and_tail(tmp_path: Path) -> None:
    path = tmp_path / "stderr.txt"
    head, tail = b"Fatal Python error: Segmentation fault\n", b"the last line\n"
    path.write_bytes(head + b"x" * (3 * executor.STDERR_CAP) + tail)
    text = executor.read_capped(path)
    assert text.startswith(head.decode()) and text.endswith(tail.decode())
    assert len(text) < executor.STDERR_HEAD + executor.STDERR_END + 100
    assert "bytes cut]" in text
    small = tmp_path / "small.txt"
    small.write_bytes(head + tail)
    assert executor.read_capped(small) == (head + tail).decode()
    # A forked worker killed before it opened its stderr file (fault injection met it).
    assert executor.read_capped(tmp_path / "never-opened.txt") == ""
