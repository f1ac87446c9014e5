"""What a campaign is asked to do: `racefuzz run`'s flags, as `Campaign` reads them."""

from __future__ import annotations

from dataclasses import dataclass

from racefuzz.schedule.model import Schedule


@dataclass(frozen=True)
class CampaignConfig:
    seconds: float
    jobs: int
    seed: int = 0
    strategy: str = "portfolio"
    corpus: tuple[Schedule, ...] = ()
    step_timeout: float = 20.0
    max_rss_mb: float = 4096.0
    shrink: bool = True
    max_steps: int = 24
    max_threads: int = 4
    zygote: bool = True  # fork workers from a pre-initialised zygote where POSIX allows
    lifecycle: bool = True  # unregister / re-register mid-schedule
    allow_misuse: bool = False  # generate outside ORT's API contract too (schedule.contract)
    known_issues: frozenset[str] = frozenset()  # clusters that do not fail the run
    # False: no fuzzing, every slot takes the restored shrinks until none is left (a resumed
    # campaign whose deadline cut its shrinks short; on a slow GPU EP that is most of them).
    fuzz: bool = True
