"""What a shrink reports (`ShrinkResult`, progress `ShrinkEvent`s), when its minimal schedule
counts as reproduced, and the default time budget: shared by the shrinker, the campaign's
shrink hook, reports and the folder's stored state."""

from __future__ import annotations

import math
from dataclasses import dataclass

from racefuzz.judge.identity import ShrinkStop
from racefuzz.judge.outcome import RunResult
from racefuzz.schedule.model import Schedule


@dataclass(frozen=True)
class PassStats:
    name: str
    runs: int = 0  # times the pass was run (once a round)
    candidates: int = 0  # simpler, well-formed candidates it had tested (cache hits excluded)
    calls: int = 0  # executor runs those took
    shrinks: int = 0  # candidates it kept


@dataclass(frozen=True)
class ShrinkEvent:
    """A progress report: sent after each tested candidate and at the start of each phase."""

    phase: str  # "check", a pass name, "verify" or "reproduce"
    steps: int  # of the best schedule so far
    threads: int
    candidates: int  # tested so far, all phases
    calls: int  # executor runs so far
    improved: bool  # this event is a kept candidate


@dataclass(frozen=True)
class ShrinkResult:
    original: Schedule
    final: Schedule  # equals `original` when nothing simpler failed, or it never reproduced
    # What `final` was shrunk to show: the signature asked for, or the cluster of an earlier
    # overlap group that the failure was blamed on (see the module's docstring).
    signature: str
    passes: tuple[PassStats, ...]  # in pass order, then "verify"
    candidates: int
    calls: int  # executor runs, the reproduction replays included
    seconds: float
    # No single deletion of `final` (with its dependants) failed `need` of `replays`; False
    # when the budget ran out before that was checked.
    one_minimal: bool
    reproduction: tuple[int, int]  # (failed with the signature, replays) of `final`
    measured: tuple[int, int]  # (failed, runs) of `original` before the search: its rate
    check: tuple[int, int]  # (need, replays) of each candidate's check, sized to that rate
    budget_s: float  # the time budget as it ended up (stretched for larger checks)
    last_failure: RunResult | None  # the last run of `final` that failed; None if none did
    stopped: ShrinkStop
    symptom: str = ""  # the failure the shrink was pinned to (`shrink_runs.shows`), if any

    @property
    def rate(self) -> float:
        k, n = self.reproduction
        return k / n if n else 0.0

    @property
    def confirmed(self) -> bool:
        """Whether `final` reproduced often enough to be called the shrunk schedule."""
        return confirmed(*self.reproduction)


# A minimal schedule that showed the finding in fewer of its confirmation replays than this is
# "not reproduced": a flaky once-in-twenty run is not something to hand to an EP team as shrunk.
MIN_REPRODUCTION = 0.1


def confirmed(k: int, n: int) -> bool:
    """k failing of n replays is enough: at least one, and at least MIN_REPRODUCTION of n."""
    return n > 0 and k >= max(1, math.ceil(MIN_REPRODUCTION * n))


MAX_BUDGET_S = 1800.0


# A shrink inside a campaign with time left to fuzz takes at most this share of the campaign
# (and never less than the floor): one rare race's shrink took a whole 300 s webgpu campaign
# while three other clusters waited unshrunk. Cut there, its bundle says so and
# `--shrink-only` goes on from its minimal schedule.
CAMPAIGN_SHARE = 0.25
CAMPAIGN_FLOOR_S = 30.0


def campaign_cap(campaign_s: float) -> float:
    """The most one shrink may take inside a campaign of `campaign_s` seconds that fuzzes."""
    return max(CAMPAIGN_FLOOR_S, CAMPAIGN_SHARE * campaign_s)


def budget_for(run_s: float, floor_s: float = 60.0) -> float:
    """A shrink budget that scales with the measured cost of one run: room for about 150
    runs (a few passes and the confirmation replays), never less than `floor_s`, at most 30
    minutes. 25 ms runs get the floor; 1.5 s GPU runs get 225 s."""
    return min(max(floor_s, 150 * run_s), MAX_BUDGET_S)
