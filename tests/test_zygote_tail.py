"""The zygote path's event tail loses nothing the worker wrote before it ended.

The race (seen as bogus "crash, exit code 0" findings at 8-16 jobs): the tail read nothing, the
worker then wrote its last events and ended, and the tail saw "ended" and stopped without
reading again. Here the worker ends exactly inside that window, every time: its last lines are
written by the very call that reports it ended.
"""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

from racefuzz.execute.zygote_pool import _tail


class EndsWhileAsked:
    """An `ended` event whose first `is_set()` writes the worker's last lines, then says yes."""

    def __init__(self, path: Path, lines: list[dict[str, Any]]) -> None:
        self.path, self.lines, self.done = path, lines, False

    def is_set(self) -> bool:
        if not self.done:
            with self.path.open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(line) + "\n" for line in self.lines)
            self.done = True
        return True


def test_events_written_just_before_the_end_are_all_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"ev": "ready"}) + "\n")
    last = [{"ev": "done", "step": 0}, {"ev": "end"}]
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    _tail(path, events, EndsWhileAsked(path, last))  # type: ignore[arg-type]
    got = []
    while (ev := events.get_nowait()) is not None:
        got.append(ev)
    assert got == [{"ev": "ready"}, *last]


def test_a_line_without_its_newline_yet_is_not_read_half(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"ev": "start", "st')
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    ended = threading.Event()
    reader = threading.Thread(target=_tail, args=(path, events, ended))
    reader.start()
    with path.open("a", encoding="utf-8") as f:
        f.write('ep": 3}\n')
    ended.set()
    reader.join(5)
    assert events.get_nowait() == {"ev": "start", "step": 3}
    assert events.get_nowait() is None
