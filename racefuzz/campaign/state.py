"""What a campaign knows: its counters and one record per finding cluster.

A cluster is the findings that share a root-cause identity (`Finding.cluster`): one crash seen
with many different sets of ops in flight is one cluster, with one bundle. Each record keeps
the cluster's first finding, how many runs and distinct signatures showed it, and its smallest
member schedule so far (the one shrinking starts from). After shrinking, two clusters whose
minimal schedules are the same schedule are one bug: the later one is marked a duplicate.

A cluster's verdict decides the exit code: `new` ones fail the run; `known` ones (listed in the
user's known-issues file) and `misuse` ones (outside ORT's API contract) are reported apart and
do not. Everything here is small and bounded by the number of clusters, so a campaign's memory
stays flat however long it runs.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from racefuzz.judge.baseline import ALONE
from racefuzz.judge.identity import ClusterState
from racefuzz.judge.outcome import Finding, RunResult
from racefuzz.schedule.json_io import dumps
from racefuzz.schedule.model import Schedule

MAX_SIGNATURES_KEPT = 200  # per cluster: enough to count variants, bounded memory
# Log lines kept: the dashboard shows the newest few, and `--no-dashboard` prints every line it
# finds here each half second. A burst of more than this within half a second would lose lines
# from a CI log (12 did: a resumed campaign restarting its shrinks lost NEW lines).
LOG_KEPT = 500
MAX_PLACES_KEPT = 1000  # nodes per cluster: a fleet's size, bounded all the same


def where_seen(places: dict[str, str]) -> str:
    """'1 node' or '3 nodes, 2 GPU kinds' (device kinds as the nodes named them); ''."""
    if not places:
        return ""
    nodes = f"{len(places)} node{'s' * (len(places) > 1)}"
    kinds = set(places.values())
    if len(kinds) < 2:
        return f"{nodes}, {next(iter(kinds)) or 'one device kind'}"
    word = "GPU" if all(k.startswith("gpu") for k in kinds) else "device"
    return f"{nodes}, {len(kinds)} {word} kinds"


@dataclass
class FindingRecord:
    finding: Finding  # the cluster's first finding (classified by its baseline later)
    count: int
    first_seen_s: float
    original: Path  # the first schedule of the cluster, on disk from the moment it was seen
    smallest: Schedule  # the cluster's smallest member so far
    smallest_result: RunResult | None  # a failing run of `smallest` (None: lost, not shrinkable)
    status: ClusterState = ClusterState.NEW
    minimal: Schedule | None = None  # the shrunk schedule, once it reproduced
    reproduction: tuple[int, int] | None = None
    bundle: Path | None = None
    signatures: set[str] = field(default_factory=set)
    known: bool = False  # listed in the known-issues file
    duplicate_of: str | None = None  # the cluster this one repeats (its minimal schedule, or
    # its failure alone: `AloneUnderOverlap`)
    earlier_signatures: int = 0  # counted by the run this one resumed
    # The cluster its minimal schedule's failure belongs to: another cluster's when the shrink
    # cut an overlap's bystanders (`shrink_runs.shows`), i.e. it was that cluster's race.
    shrunk_to: str | None = None
    # Its minimal schedule is where a shrink stopped when its time budget ran out, before it
    # was shown 1-minimal (the bundle's shrink statistics say so): `--shrink-only` goes on.
    cut_short: bool = False
    adopted_from: str | None = None  # the duplicate whose minimal schedule became this one's
    retry: str = ""  # what a shrink again from a reproducer found, when it kept the old one
    notes: list[str] = field(default_factory=list)  # why it is a duplicate, said once each
    # On a Ray fleet: every node its members failed on, with that node's device kind.
    places: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The state line: "shrunk, reproduced 9/10, its budget ran out before it was
        1-minimal, same minimal schedule as 'crash|SIGSEGV|run'"."""
        text = self.status.describe(self.reproduction)
        if self.status is ClusterState.SHRUNK:
            if self.adopted_from is not None:
                text += f" (the minimal schedule of '{self.adopted_from}')"
            elif self.cut_short:
                text += ", its budget ran out before it was 1-minimal"
            if self.retry:
                text += f"; {self.retry}"
        return "".join([text, *(f", {note}" for note in self.notes)])

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @property
    def signature_count(self) -> int:
        return self.earlier_signatures + len(self.signatures)

    # Files kept beside the cluster's first schedule (`campaign_store` reads them back).
    @property
    def smallest_path(self) -> Path:
        return self.original.with_suffix(".smallest.json")

    @property
    def run_path(self) -> Path:
        """Where the failing run of `smallest` is kept, for shrinking after a resume."""
        return self.original.with_suffix(".run.json")

    @property
    def best_path(self) -> Path:
        """The shrinker's best schedule so far, complete at every moment."""
        return self.original.with_suffix(".min.json")

    @property
    def minimal_steps(self) -> int | None:
        return None if self.minimal is None else len(self.minimal.steps)

    @property
    def cluster(self) -> str:
        return self.finding.cluster

    @property
    def verdict(self) -> str:
        """misuse | known | duplicate | new: only `new` fails a campaign."""
        if self.finding.misuse:
            return "misuse"
        if self.known:
            return "known"
        return "duplicate" if self.duplicate_of else "new"

    def seen_at(self, result: RunResult) -> None:
        """Keep where a failing run ran (a fleet's node and device; nothing locally)."""
        if result.node and len(self.places) < MAX_PLACES_KEPT:
            self.places.setdefault(result.node, result.device)

    def where(self) -> str:
        """e.g. '3 nodes, 2 GPU kinds': where a fleet campaign saw it; '' locally."""
        return where_seen(self.places)

    def add_member(self, finding: Finding, result: RunResult) -> bool:
        """Count one more run of this cluster; True when its schedule is the new smallest."""
        self.count += 1
        self.seen_at(result)
        if len(self.signatures) < MAX_SIGNATURES_KEPT:
            self.signatures.add(finding.signature)
        smaller = len(result.schedule.steps) < len(self.smallest.steps)
        if self.status is ClusterState.NEW and smaller:
            self.smallest, self.smallest_result = result.schedule, result
            return True
        return False


@dataclass(frozen=True)
class Totals:
    """What a campaign folder's runs did in all: `--resume` adds one run to them."""

    runs: int = 0
    schedules: int = 0
    seconds: float = 0.0
    crashes: int = 0
    hangs: int = 0


@dataclass
class CampaignState:
    """Everything the dashboard and the summary show; small and bounded by clusters."""

    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0
    jobs: int = 1
    schedules: int = 0
    steps: int = 0
    crashes: int = 0
    hangs: int = 0
    killed: int = 0  # workers killed from outside: no finding, only counted
    lost: int = 0  # runs a fleet node took with it when it died or left: never findings
    findings: dict[str, FindingRecord] = field(default_factory=dict)  # by cluster
    by_strategy: dict[str, dict[str, int]] = field(default_factory=dict)
    busy: int = 0
    worker_rss_mb: float = 0.0
    campaign_rss_mb: float = 0.0
    interrupted: bool = False
    interrupted_by: str = ""  # e.g. "Ctrl-C" or "SIGTERM"
    done: bool = False
    internal_errors: list[str] = field(default_factory=list)  # racefuzz's own tracebacks
    log: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_KEPT))
    log_total: int = 0  # lines ever logged: lets a plain printer know what it has not shown
    earlier: Totals = field(default_factory=Totals)  # the folder's runs before this one

    def totals(self) -> Totals:
        """This run and the folder's earlier ones together."""
        e = self.earlier
        return Totals(
            e.runs + 1,
            e.schedules + self.schedules,
            e.seconds + self.elapsed(),
            e.crashes + self.crashes,
            e.hangs + self.hangs,
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def rate(self) -> float:
        return self.schedules / max(self.elapsed(), 1e-9)

    def by_verdict(self, verdict: str) -> list[FindingRecord]:
        records = sorted(list(self.findings.values()), key=lambda r: r.first_seen_s)
        return [r for r in records if r.verdict == verdict]

    def failing(self) -> list[FindingRecord]:
        """The clusters that fail the run: new ones (not known, not misuse, not duplicates)."""
        return self.by_verdict("new")

    def counts(self) -> str:
        """e.g. '3 new, 2 known, 1 misuse' (clusters), for dashboards and summaries."""
        parts = [
            f"{len(self.by_verdict(v))} {v}"
            for v in ("new", "known", "misuse", "duplicate")
            if v == "new" or self.by_verdict(v)
        ]
        return ", ".join(parts)

    def mark_duplicate(self, rec: FindingRecord) -> None:
        """Two clusters that shrank to one minimal schedule are one bug: the one shrunk first
        stays, the other is marked its duplicate. So is a cluster that shrank to another one's
        race (its minimal schedule fails as that cluster), whatever threads its steps are on.
        Either way the simpler schedule becomes the bug's reproducer (`adopt`)."""
        for dup in list(self.findings.values()):  # its duplicates, shrunk before it was
            if dup.duplicate_of == rec.cluster:
                self.adopt(dup)  # also when its own shrink did not reproduce
        if rec.minimal is None:
            return
        if self._same_bug(rec):
            self.adopt(rec)

    def _same_bug(self, rec: FindingRecord) -> bool:
        """Mark `rec` a duplicate when it is one (see `mark_duplicate`); True when it was."""
        assert rec.minimal is not None
        if rec.shrunk_to not in (None, rec.cluster):
            other = self.findings.get(rec.shrunk_to)
            if other is not None and other.duplicate_of is None:
                rec.duplicate_of = other.cluster
                rec.note(f"shrank to the race of '{other.cluster}'")
                return True
        if rec.duplicate_of is not None:  # of one defect with another cluster, since it opened
            return True
        mine = _story(rec.minimal)
        for other in list(self.findings.values()):
            if other is rec or other.minimal is None or other.duplicate_of is not None:
                continue
            same_kind = bool(other.finding.misuse) == bool(rec.finding.misuse)
            if same_kind and _story(other.minimal) & mine:
                rec.duplicate_of = other.cluster
                rec.note(f"same minimal schedule as '{other.cluster}'")
                return True
        return False

    def same_defect(self, finding: Finding) -> FindingRecord | None:
        """The first cluster (itself no duplicate) of the defect `finding` shows, when another
        cluster than its own holds it (`Finding.defect`): one crashing helper reached by run,
        copy and feed is one bug, however many ops' clusters it opens."""
        defect = finding.defect
        if defect is None:
            return None
        # A cluster that fails the run first: a known issue holds a defect only where no new
        # cluster does.
        order = sorted(list(self.findings.values()), key=lambda r: (r.known, r.first_seen_s))
        for other in order:
            distinct = other.duplicate_of is None and other.cluster != finding.cluster
            if distinct and other.finding.defect == defect:
                return other
        return None

    def open_duplicate(self, rec: FindingRecord) -> None:
        """Mark a cluster just opened a duplicate when an earlier one holds its defect. Not of
        a known issue, though: one error message is no proof of one defect (B3's "invalid
        argument" is also R1's, a filed issue), and a duplicate of a known issue would not fail
        the run. Such a cluster stays new; its shrink may still show it is the same bug."""
        other = self.same_defect(rec.finding)
        if other is None or rec.duplicate_of is not None:
            return
        if other.known and not rec.known:
            rec.note(f"the same error as the known issue '{other.cluster}': new until shrunk")
            return
        rec.duplicate_of = other.cluster
        rec.note(f"the same defect as '{other.cluster}'")

    def rekey(self, rec: FindingRecord, finding: Finding) -> FindingRecord:
        """Move `rec` to `finding`'s cluster (its own finding seen again under another key),
        or, when a record holds that key already, count it there and drop it: the record that
        holds `finding`'s cluster now. Its first schedule stays on disk, in the corpus."""
        if self.findings.get(rec.cluster) is rec:
            del self.findings[rec.cluster]
        holder = self.findings.get(finding.cluster)
        if holder is None:
            rec.finding = finding
            self.findings[finding.cluster] = rec
            return rec
        holder.count += rec.count
        room = MAX_SIGNATURES_KEPT - len(holder.signatures)
        holder.signatures.update(itertools.islice(rec.signatures, max(room, 0)))
        return holder

    def adopt(self, dup: FindingRecord) -> None:
        """A duplicate's minimal schedule reproduces the bug of the cluster it repeats. When it is
        the better reproducer (`preference`) than that cluster's own, or that one has none,
        it becomes that cluster's minimal schedule and bundle, as Hypothesis keeps the simplest
        example of each distinct failure whichever shrink found it: the shrink of
        `[create || create]; [run || run]` may end at 8 steps while its bystander's ends at 5."""
        primary = self.findings.get(dup.duplicate_of or "")
        if primary is None or primary.status is ClusterState.SHRINKING or not reproducer(dup):
            return
        if reproducer(primary) and _preference(primary) <= _preference(dup):
            return
        assert dup.minimal is not None and dup.reproduction is not None
        primary.minimal, primary.reproduction, primary.bundle, primary.cut_short = (
            dup.minimal,
            dup.reproduction,
            dup.bundle,
            dup.cut_short,  # a fact of that bundle's shrink, as a restore would read it
        )
        primary.status, primary.adopted_from, primary.retry = ClusterState.SHRUNK, dup.cluster, ""


def reproducer(rec: FindingRecord) -> bool:
    """Whether `rec` has a bundled minimal schedule with its measured rate."""
    return rec.minimal is not None and rec.reproduction is not None and rec.bundle is not None


# A reproducer failing at least this often shows the bug in 10 runs of its repro.py 19 times
# in 20; one failing 1 run in 10 leaves a bug ticket's reader unsure it reproduced at all.
DEPENDABLE_RATE = 0.25


def dependable(reproduction: tuple[int, int]) -> bool:
    k, n = reproduction
    return k >= DEPENDABLE_RATE * n > 0


def preference(minimal: Schedule, reproduction: tuple[int, int]) -> tuple[bool, int, float]:
    """Smaller is the better reproducer: a dependable rate first, then fewer steps, then a
    higher rate. On the H200 'copy+run' took a bystander's 4 steps failing 2 runs in 20 over
    another's 6 failing 15 in 18; a ticket needs the one that fails."""
    k, n = reproduction
    return not dependable(reproduction), len(minimal.steps), -k / max(n, 1)


def _preference(rec: FindingRecord) -> tuple[bool, int, float]:
    assert rec.minimal is not None and rec.reproduction is not None
    return preference(rec.minimal, rec.reproduction)


def _story(schedule: Schedule) -> set[str]:
    """A minimal schedule in every renaming of its profiles onto each other (for two
    profiles, as written and swapped). Two clusters whose minimal schedules differ only in which
    profile plays which role are one bug seen from both sides, e.g. a copy misrouted from
    backend A to B and from B to A."""
    names = sorted(schedule.profiles())
    out = set()
    for order in itertools.permutations(names):
        rename = dict(zip(names, order, strict=True))
        steps = [
            replace(s, profile=rename.get(s.profile or "")) if s.profile else s
            for s in schedule.steps
        ]
        out.add(dumps(Schedule(schedule.threads, tuple(steps))))
    return out


class AloneUnderOverlap:
    """Under overlap clustering, a symptom whose baseline says it fails alone (an EP limit,
    deterministic whatever overlapped before it) is no race: it is clustered by its symptom, as
    without overlap clustering, instead of by the overlap shape it happened to follow. A cluster
    it opened under a shape is moved to its symptom's key (`CampaignState.rekey`), so that the
    shape's own race opens that shape's cluster when it next shows: on webgpu a placement error
    that fails alone held 'overlap|copy+run', and the race there had no cluster of its own.
    Written by baseline tasks (job threads: one set add), read when results are recorded."""

    def __init__(self) -> None:
        self._symptoms: set[str] = set()  # symptom cluster keys that fail alone
        self._checked: set[str] = set()  # symptom cluster keys whose baseline ran or is queued

    def learn(self, state: CampaignState, rec: FindingRecord) -> FindingRecord | None:
        """Take in a cluster's baseline verdict: the record that now holds a symptom that fails
        alone (`rec` under its symptom's key, or one that held that key already and took it
        in), or None when `rec` stays as it is."""
        finding = rec.finding
        self.know(finding)
        if finding.origin != ALONE or not finding.overlap:
            return None
        return state.rekey(rec, replace(finding, overlap=""))

    def know(self, finding: Finding) -> None:
        """Take in a finding whose baseline was run (a restored cluster's, say)."""
        self._checked.add(finding.symptom)
        if finding.origin == ALONE:
            self._symptoms.add(finding.symptom)

    def first_sight(self, finding: Finding, rec: FindingRecord) -> bool:
        """Whether `finding`, counted into the overlap cluster `rec` another symptom opened,
        shows a symptom no baseline has looked at: one that fails alone in the same
        schedules as a race (as webgpu's placement error beside its CommandEncoder race) would
        otherwise never open a cluster of its own. True once per symptom."""
        if not finding.overlap or finding.step is None or finding.misuse:
            return False
        if finding.kind == "misroute" or finding.symptom == rec.finding.symptom:
            return False
        if finding.symptom in self._checked:
            return False
        self._checked.add(finding.symptom)
        return True

    def route(self, finding: Finding) -> Finding:
        if finding.overlap and finding.symptom in self._symptoms:
            return replace(finding, overlap="", origin=ALONE)
        return finding
