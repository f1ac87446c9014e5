"""`racefuzz run --resume DIR`: the campaign's own options, unless the command line gives them.

Every option of `racefuzz run` that shapes what a campaign finds, or how it judges it, goes into
findings.json's header (`header_fields`). A resume (`settle`) takes each one the command line
left out from that header, and prints one line for each one it gave otherwise. The run parser's
defaults for these options are None, so that "given" and "left out" can be told apart; `settle`
fills in the defaults for what neither gave: a new campaign, or a field that the header of an
earlier release's folder lacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racefuzz.campaign import known_issues
from racefuzz.campaign import store as campaign_store
from racefuzz.errors import RacefuzzError
from racefuzz.targets.model import DEFAULT_CONFIG, Target, is_builtin


class _Bad(Exception):
    """A header value of the wrong type; the message says what it should have been."""


class _Missing:
    """A field the header does not have (an earlier release's folder)."""


MISSING = _Missing()


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):  # JSON true is no job count
        raise _Bad("an integer")
    return v


def _float(v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Bad("a number")
    return float(v)


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise _Bad("a string")
    return v


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise _Bad("true or false")
    return v


def _path(v: object) -> Path:
    return Path(_str(v))


def _or_none(parse: Callable[[object], object]) -> Callable[[object], object]:
    return lambda v: None if v is None else parse(v)


def _clusters(v: object) -> frozenset[str]:
    if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
        raise _Bad("a list of cluster keys")
    return frozenset(v)


def _tolerance(v: object) -> tuple[float, float] | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 2:
        raise _Bad("[rtol, atol] or null")
    return (_float(v[0]), _float(v[1]))


def _text(v: object) -> str:
    if v is None:
        return "default"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _same(a: object, b: object) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a.resolve() == b.resolve()
    return a == b


def _dumped(v: object) -> object:
    # Absolute: a resume from another folder must find the same files.
    return str(v.resolve()) if isinstance(v, Path) else v


@dataclass(frozen=True)
class Kept:
    """One option a resume keeps: its argparse dest, which is also its header key."""

    dest: str
    flag: str  # a switch's flag for True
    parse: Callable[[object], object]  # a header value, checked
    default: Callable[[], object]
    off: str = ""  # a switch's flag for False

    def spelled(self, value: object) -> str:
        if self.off:
            return self.flag if value else self.off
        return f"{self.flag} {_text(value)}"

    def was(self, value: object) -> str:
        return self.spelled(value) if self.off else _text(value)


KEPT = (
    Kept("config", "--config", _or_none(_path), lambda: None),
    Kept("seed", "--seed", _int, lambda: 0),
    Kept("step_timeout", "--step-timeout", _float, lambda: 20.0),
    Kept("seconds", "--seconds", _float, lambda: 60.0),
    Kept("jobs", "--jobs", _int, lambda: os.cpu_count() or 1),
    Kept("strategy", "--strategy", _str, lambda: "portfolio"),
    Kept("max_steps", "--max-steps", _int, lambda: 24),
    Kept("max_rss_mb", "--max-rss-mb", _float, lambda: 4096.0),
    Kept("shrink", "--shrink", _bool, lambda: True, off="--no-shrink"),
    Kept("shrink_budget", "--shrink-budget", _or_none(_float), lambda: None),
    Kept("shrink_parallel", "--shrink-parallel", _int, lambda: 1),
    Kept("lifecycle", "--lifecycle", _bool, lambda: True, off="--no-lifecycle"),
    Kept("allow_misuse", "--allow-misuse", _bool, lambda: False, off="--no-allow-misuse"),
    Kept("zygote", "--zygote", _bool, lambda: True, off="--spawn"),
    Kept("persistent", "--persistent", _bool, lambda: False, off="--no-persistent"),
    Kept("models", "--models", _or_none(_str), lambda: None),  # None: the target's own
    Kept("ray", "--ray", _or_none(_str), lambda: None),  # None: on this machine
)
# Kept too, each in its own way: the target (`commands._target_spec` refuses another one), the
# corpus (two flags, one choice) and the known issues (the clusters, not only the file).
KEPT_APART = ("target", "corpus", "no_corpus", "known")
# What one invocation does with the campaign, not what the campaign is.
PER_RUN = (
    "help",
    "resume",
    "out",
    "junit",
    "no_dashboard",
    "shrink_only",
    "write_known",
)


@dataclass
class Resumed:
    """What `settle` learnt: the campaign's header and what the command line gave again."""

    folder: Path | None
    header: dict[str, Any]
    given: frozenset[str] = frozenset()  # dests of KEPT given on the command line
    known: frozenset[str] | None = None  # the campaign's known clusters, kept
    known_path_kept: bool = False  # the file's path kept, from a header without its clusters
    overrides: list[str] = field(default_factory=list)
    # Header values that are not this run's: what `--shrink-only` implies is not the campaign's.
    in_header: dict[str, object] = field(default_factory=dict)


def settle(args: argparse.Namespace) -> None:
    """Fill every option the command line left out: from the resumed campaign, else the
    default. Before the target loads: a resume's `--config` is the campaign's own."""
    folder: Path | None = args.resume
    if folder is not None and not folder.is_dir():
        raise RacefuzzError(f"cannot resume '{folder}': no such campaign folder")
    header = campaign_store.read_header(folder) if folder is not None else {}
    r = Resumed(folder, header)
    for key in ("target", "target_spec"):
        _field(r, key, _or_none(_str))
    given = set()
    for opt in KEPT:
        value, old = getattr(args, opt.dest), _field(r, opt.dest, opt.parse)
        kept = opt.default() if old is MISSING else old
        if value is None and opt.dest == "shrink" and args.shrink_only:
            # Finishing the shrinks is all it does: the campaign's --no-shrink stays its own.
            args.shrink, r.in_header["shrink"] = True, kept
        elif value is None:
            setattr(args, opt.dest, kept)
        else:
            given.add(opt.dest)
            if old is not MISSING and not _same(value, old):
                r.overrides.append(f"{opt.spelled(value)} overrides the campaign's {opt.was(old)}")
    r.given = frozenset(given)
    _settle_corpus(args, r)
    _settle_known(args, r)
    args.resumed = r


def _field(r: Resumed, key: str, parse: Callable[[object], object]) -> object:
    if key not in r.header:
        return MISSING
    try:
        return parse(r.header[key])
    except _Bad as e:
        shown = json.dumps(r.header[key])[:60]
        raise RacefuzzError(
            f"cannot resume '{r.folder}': its findings.json has '{key}': {shown}, not {e}"
        ) from None


def _corpus_label(no_corpus: bool, corpus: Path | None) -> str:
    if no_corpus:
        return "--no-corpus"
    return f"--corpus {corpus}" if corpus is not None else "the default corpus"


def _settle_corpus(args: argparse.Namespace, r: Resumed) -> None:
    no_corpus, corpus = _field(r, "no_corpus", _bool), _field(r, "corpus", _or_none(_path))
    if args.corpus is None and not args.no_corpus:
        args.no_corpus = no_corpus if isinstance(no_corpus, bool) else False
        args.corpus = corpus if isinstance(corpus, Path) else None
        return
    if no_corpus is MISSING and corpus is MISSING:
        return
    was = (no_corpus is True, corpus if isinstance(corpus, Path) else None)
    now = (bool(args.no_corpus), args.corpus)
    if was[0] != now[0] or (not now[0] and not _same(was[1], now[1])):
        r.overrides.append(f"{_corpus_label(*now)} overrides the campaign's {_corpus_label(*was)}")


def _settle_known(args: argparse.Namespace, r: Resumed) -> None:
    path = _field(r, "known_issues", _or_none(_path))
    clusters = _field(r, "known_clusters", _clusters)
    if args.known is not None:
        if path is not MISSING and not (isinstance(path, Path) and _same(path, args.known)):
            r.overrides.append(f"--known {args.known} overrides the campaign's {path or 'none'}")
        return
    if isinstance(clusters, frozenset):
        r.known = clusters  # the file may have moved, or been edited since: the campaign's own
    if isinstance(path, Path):
        args.known = path
        r.known_path_kept = r.known is None  # an earlier release kept only the file's path


def known_clusters(args: argparse.Namespace, target: Target) -> frozenset[str]:
    """The clusters that do not fail this run: from `--known`, else the campaign's."""
    r: Resumed = args.resumed
    if r.known is not None:
        return r.known
    if args.known is None:
        return frozenset()
    try:
        return known_issues.load(args.known, target.name)
    except RacefuzzError as e:
        if not r.known_path_kept:
            raise
        raise RacefuzzError(
            f"cannot resume '{r.folder}' with the campaign's known issues: {e} (pass --known FILE)"
        ) from None


def finish(args: argparse.Namespace, target: Target) -> Target:
    """Once the target loaded (and was found to be the campaign's): say what the command line
    overrode, and keep the campaign's tolerance."""
    r: Resumed = args.resumed
    target = _keep_tolerance(r, target)
    for line in r.overrides:
        print(f"racefuzz: resume: {line}", flush=True)
    return target


def _keep_tolerance(r: Resumed, target: Target) -> Target:
    # The campaign's (rtol, atol), unless --config was given again: a config edited since must
    # not judge the rest of the campaign otherwise.
    old = _field(r, "tolerance", _tolerance)
    if old is MISSING or old == target.tolerance:
        return target
    now = target.tolerance
    if "config" in r.given:
        r.overrides.append(f"--config's tolerance {now} overrides the campaign's {old}")
        return target
    r.overrides.append(
        f"the campaign's tolerance {old} kept (its config now says {now}: pass --config to "
        "take that)"
    )
    assert old is None or isinstance(old, tuple)
    return dataclasses.replace(target, tolerance=old)


def header_fields(
    args: argparse.Namespace, target: Target, known: frozenset[str]
) -> dict[str, Any]:
    """The campaign's options, as findings.json's header keeps them for a resume."""
    config = args.config
    if config is None and not is_builtin(args.target) and Path(DEFAULT_CONFIG).is_file():
        config = Path(DEFAULT_CONFIG)  # the current folder's: a resume elsewhere needs its path
    return {
        "target": target.name,
        "target_spec": args.target,
        **{opt.dest: _dumped(getattr(args, opt.dest)) for opt in KEPT},
        "config": _dumped(config),
        "corpus": _dumped(args.corpus),
        "no_corpus": bool(args.no_corpus),
        "known_issues": _dumped(args.known),
        "known_clusters": sorted(known),
        "tolerance": list(target.tolerance) if target.tolerance else None,
        **args.resumed.in_header,
    }
