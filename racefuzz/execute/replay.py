"""Replaying schedules: run each N times, count which signatures reproduce, classify them.

This is what `racefuzz replay schedules/` does (an EP's regression suite over the named
scenarios), and what reports quote as the reproduction rate. It does not render anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from racefuzz.execute.runner import Runner
from racefuzz.judge.baseline import Baselines
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.model import Schedule


@dataclass
class ReplaySummary:
    schedule: Schedule
    times: int
    runs: list[RunResult] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # signature -> runs it appeared in
    findings: dict[str, Finding] = field(default_factory=dict)  # signature -> first seen

    @property
    def failed(self) -> bool:
        """Whether it showed an EP bug (misuse findings, outside ORT's contract, do not count)."""
        return any(not f.misuse for f in self.findings.values())

    @property
    def misuse_only(self) -> bool:
        return bool(self.findings) and not self.failed

    def first_failing(self) -> RunResult | None:
        return next((r for r in self.runs if r.findings), None)

    def shown_run(self) -> RunResult:
        """The run whose per-step table is shown: the first failing one, else the first."""
        return self.first_failing() or self.runs[0]


def replay(
    runner: Runner,
    schedule: Schedule,
    times: int = 1,
    baselines: Baselines | None = None,
    on_run: Callable[[int, RunResult], None] | None = None,
) -> ReplaySummary:
    summary = ReplaySummary(schedule, times)
    for i in range(times):
        result = runner.run(schedule)
        summary.runs.append(result)
        for f in result.findings:
            summary.counts[f.signature] = summary.counts.get(f.signature, 0) + 1
            if f.signature not in summary.findings:
                summary.findings[f.signature] = (
                    baselines.classify(schedule, f) if baselines is not None else f
                )
        if on_run is not None:
            on_run(i, result)
    return summary
