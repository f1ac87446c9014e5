"""A campaign folder as durable state: `--resume` continues after Ctrl-C, SIGTERM or SIGKILL.

What is on disk, and when it is written:
- `findings/<slug>.json`: a cluster's first schedule, before anything else is done about it;
  `<slug>.run.json`, the failing run of the cluster's smallest member (what shrinking starts
  from); `<slug>.smallest.json`; and the shrinker's best so far, `<slug>.min.json`;
- `findings.json` and `summary.md`, rewritten whole whenever a cluster opens or a task ends, and
  every few seconds (`results.write_all`); findings.json's header holds the campaign's
  options, which `--resume` keeps (`read_header`, `cli.resume_options`);
- bundles, renamed into place whole (`bundle.write_bundle`).

Every file is written aside and renamed, so a kill leaves old or new contents, never half. A kill
can still land between two writes; `restore` closes each such gap: a bundle written but not yet
listed is adopted by its cluster (never shrunk and written twice), temporary files are removed
(`tidy`), and a finding's schedule saved before `findings.json` listed it goes back into the
corpus (`corpus`), so the resumed run meets it again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from racefuzz.atomic_file import write_text
from racefuzz.campaign.state import FindingRecord, Totals, dependable
from racefuzz.errors import RacefuzzError
from racefuzz.judge.identity import ClusterState, ShrinkStop
from racefuzz.judge.outcome import RunResult
from racefuzz.report.bundle import TMP_BUNDLE_PREFIX
from racefuzz.report.run_json import finding_from_json, run_from_json, run_to_json
from racefuzz.schedule.json_io import dumps, load, save
from racefuzz.schedule.model import Schedule, ScheduleError
from racefuzz.shrink.result import confirmed

_DERIVED = (".run.json", ".smallest.json", ".min.json")  # beside a finding's first schedule


def unique_path(folder: Path, stem: str) -> Path:
    """`folder/stem.json`, or `stem-2.json`...: a name no file has yet."""
    for n in range(1, 10_000):
        p = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
        if not p.exists():
            return p
    raise RuntimeError(f"no free file name for {stem} in {folder}")


def save_run(path: Path, run: RunResult) -> None:
    write_text(path, json.dumps({**run_to_json(run), "stderr_tail": run.stderr_tail}) + "\n")


def save_new(root: Path, rec: FindingRecord, result: RunResult) -> None:
    """A new cluster's first schedule (exclusively: never over another's), its run, and a copy
    in the corpus."""
    save(result.schedule, rec.original, exclusive=True)
    save_run(rec.run_path, result)
    save(result.schedule, unique_path(root / "corpus", rec.finding.slug), True)


def save_smallest(rec: FindingRecord) -> None:
    if rec.smallest_result is not None:
        save_run(rec.run_path, rec.smallest_result)
    write_text(rec.smallest_path, dumps(rec.smallest))


def load_run(path: Path) -> RunResult | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return run_from_json(d, str(d.get("stderr_tail", "")))
    except (OSError, ValueError, KeyError, TypeError, ScheduleError):
        return None


def tidy(root: Path) -> None:
    """Remove what a killed racefuzz left half done: temporary bundles and files, and bundle
    names claimed but never filled."""
    for p in root.glob(TMP_BUNDLE_PREFIX + "*"):
        shutil.rmtree(p, ignore_errors=True)
    for folder in (root, root / "findings", root / "corpus"):
        for p in folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)
    for p in root.iterdir():
        if p.is_dir() and p.name not in ("findings", "corpus") and not any(p.iterdir()):
            p.rmdir()


def drop_unlisted(root: Path, listed: set[str]) -> None:
    """Remove the complete bundles no cluster lists: one a shrink replaced, whose removal a
    deadline cut off (its thread abandoned), would otherwise stay beside the one it lists."""
    for p in root.iterdir():
        if p.is_dir() and (p / "finding.json").is_file() and p.name not in listed:
            shutil.rmtree(p, ignore_errors=True)


def bundles_by_cluster(root: Path) -> dict[str, Path]:
    """Every complete bundle in a campaign folder, by the cluster its finding belongs to."""
    found: dict[str, Path] = {}
    for p in sorted(root.iterdir()):
        if not p.is_dir() or p.name.startswith(".") or not (p / "report.md").is_file():
            continue
        try:
            d = json.loads((p / "finding.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and d.get("cluster"):
            found.setdefault(str(d["cluster"]), p)
    return found


def header(root: Path) -> dict[str, Any]:
    """A campaign folder's findings.json ({} when there is none yet, or it cannot be read)."""
    try:
        data = json.loads((root / "findings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_header(root: Path) -> dict[str, Any]:
    """What `--resume` continues from: {} when the folder has no findings.json yet (killed before
    its first write). One that is there but damaged is an error, not a fresh start: the
    resumed run would write over the clusters it lists."""
    try:
        data = json.loads((root / "findings.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise RacefuzzError(f"cannot resume '{root}': findings.json: {e.strerror}") from None
    except ValueError:  # UnicodeDecodeError included
        raise RacefuzzError(f"cannot resume '{root}': findings.json is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings", []), list):
        raise RacefuzzError(
            f"cannot resume '{root}': its findings.json is not a campaign's (an object with "
            "a 'findings' list)"
        )
    return data


def totals(root: Path) -> Totals:
    """What the earlier runs of a campaign folder did in all (a folder written before totals
    were kept counts as one run of its schedules; its crashes and hangs are unknown)."""
    data = header(root)
    kept = data.get("totals")
    try:
        if isinstance(kept, dict):
            return Totals(
                int(kept["runs"]),
                int(kept["schedules"]),
                float(kept["seconds"]),
                int(kept["crashes"]),
                int(kept["hangs"]),
            )
        if data:
            return Totals(1, int(data.get("schedules") or 0), float(data.get("elapsed_s") or 0))
    except (KeyError, TypeError, ValueError):
        pass
    return Totals()


def entries(root: Path) -> list[dict[str, Any]]:
    """The findings.json entries of a campaign folder ([] when there is none yet)."""
    return [f for f in header(root).get("findings") or [] if isinstance(f, dict)]


def restore(root: Path) -> list[FindingRecord]:
    """The clusters an earlier run of this campaign folder found, as it left them."""
    tidy(root)
    bundles = bundles_by_cluster(root)
    records: list[FindingRecord] = []
    for entry in entries(root):
        rec = _record(root, entry, bundles)
        if rec is not None:
            records.append(rec)
    return records


def _record(root: Path, e: dict[str, Any], bundles: dict[str, Path]) -> FindingRecord | None:
    try:
        finding = finding_from_json(e)
        original = root / str(e["original"])
        first = load(original)
    except (KeyError, TypeError, ScheduleError):
        return None  # kept in findings.json as it was (`results.write_all` merges it back)
    run = load_run(original.with_suffix(".run.json"))
    listed = root / str(e["bundle"]) if e.get("bundle") else None
    bundle = listed if listed is not None and listed.is_dir() else bundles.get(finding.cluster)
    rec = FindingRecord(
        finding,
        int(e.get("count") or 1),
        float(e.get("first_seen_s") or 0.0),
        original,
        smallest=run.schedule if run is not None else first,
        smallest_result=run,
        status=_status(e),
        duplicate_of=e.get("duplicate_of"),
        shrunk_to=e.get("shrunk_to"),
        earlier_signatures=int(e.get("signatures") or 0),
        adopted_from=e.get("adopted_from"),
        retry=str(e.get("retry") or ""),
        notes=[str(n) for n in e.get("notes") or [] if isinstance(n, str)],
        places=_places(e.get("nodes")),
    )
    if "status" not in e and rec.duplicate_of is not None:  # an earlier release's entry
        rec.note(f"a duplicate of '{rec.duplicate_of}'")
    if bundle is None:
        rec.status = ClusterState.INTERRUPTED if run is not None else ClusterState.NOT_SHRUNK
        return rec
    rec.bundle = bundle
    try:
        k, n = json.loads((bundle / "finding.json").read_text(encoding="utf-8"))["reproduction"]
        minimal = load(bundle / "schedule.json")
    except (OSError, ValueError, KeyError, TypeError, ScheduleError):
        return rec
    rec.reproduction = (int(k), int(n))
    if confirmed(*rec.reproduction):
        rec.minimal = minimal
        rec.cut_short = _stopped(bundle) is ShrinkStop.BUDGET
        if listed is None:  # adopted: the run that wrote it was killed before listing it
            rec.status = ClusterState.SHRUNK
    elif listed is None:
        rec.status = ClusterState.NOT_REPRODUCED
    return rec


def _places(listed: object) -> dict[str, str]:
    """The fleet nodes a cluster was seen on, as findings.json lists them."""
    if not isinstance(listed, list):
        return {}
    return {
        str(p["node"]): str(p.get("device") or "")
        for p in listed
        if isinstance(p, dict) and p.get("node")
    }


def _status(e: dict[str, Any]) -> ClusterState:
    """A restored cluster's state: stored as `status`, or read from the state line that
    folders of earlier releases hold only (a bundle's own reproduction rate is read apart)."""
    try:
        return ClusterState(str(e.get("status")))
    except ValueError:
        return ClusterState.read(str(e.get("state") or ""))


def _stopped(bundle: Path) -> ShrinkStop | None:
    """Why the shrink that wrote `bundle` stopped, if its bundle.json says."""
    try:
        stats = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))["shrink"]
        return ShrinkStop(stats["stopped"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def needs_shrinking(rec: FindingRecord, retry_unreproduced: bool = False) -> bool:
    """A restored cluster whose shrink the earlier run did not finish; with
    `retry_unreproduced` (`--shrink-only`), also one whose minimal schedule did not reproduce
    (a GPU race may need the load that `--shrink-parallel` brings), was where its shrink's
    budget ran out (a rare failure's shrink may need several calls), or fails too seldom to be
    a dependable reproducer (another shrink from its smallest member may end elsewhere; the
    shrink hook keeps whichever reproducer is better)."""
    if rec.smallest_result is None:
        return False
    if rec.bundle is None:
        return True
    if not retry_unreproduced or rec.duplicate_of is not None:
        return False
    if rec.minimal is None or rec.reproduction is None:
        return True
    return rec.cut_short or not dependable(rec.reproduction)


def left_to_shrink(records: Iterable[FindingRecord]) -> list[FindingRecord]:
    """The clusters a `--resume DIR --shrink-only` would take up (known issues are not shrunk)."""
    return [r for r in records if not r.known and needs_shrinking(r, retry_unreproduced=True)]


def best_so_far(rec: FindingRecord) -> Schedule:
    """Where a restored shrink restarts: the shrinker's best failing schedule, if it got one; the
    cluster's smallest member again when that best was bundled and did not reproduce (or too
    seldom), and the bundled minimal schedule when its shrink was cut short."""
    if rec.bundle is not None:
        return rec.minimal if rec.minimal is not None and rec.cut_short else rec.smallest
    try:
        best = load(rec.best_path)
    except ScheduleError:
        return rec.smallest
    return best if len(best.steps) < len(rec.smallest.steps) else rec.smallest


def corpus(root: Path) -> list[Schedule]:
    """The folder's corpus and its orphans: finding schedules no findings.json entry lists."""
    listed = {str(e.get("original")) for e in entries(root)}
    found: list[Schedule] = []
    for p in sorted((root / "corpus").glob("*.json")):
        found += _loaded(p)
    for p in sorted((root / "findings").glob("*.json")):
        if not p.name.endswith(_DERIVED) and str(p.relative_to(root)) not in listed:
            found += _loaded(p)
    return found


def _loaded(path: Path) -> list[Schedule]:
    try:
        return [load(path)]
    except ScheduleError:
        return []  # a hand-damaged file should not stop a resumed campaign
