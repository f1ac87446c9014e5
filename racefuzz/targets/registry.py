"""Finding a target by name: the built-in ones first, then the `[targets.<name>]` tables of a
racefuzz.toml. It sits above the target model, the built-ins and the config reader, so that none
of them has to import another back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from racefuzz.errors import RacefuzzError
from racefuzz.targets import builtin as builtin_targets
from racefuzz.targets import layer, models
from racefuzz.targets.config import Reader
from racefuzz.targets.model import BUILTIN_TARGETS, DEFAULT_CONFIG, Target, is_builtin


def load_target(spec: str, config: Path | None = None) -> Target:
    """A built-in target by name, else the `[targets.<spec>]` table of the config; with
    `[layer]` in its name (`testbed[layer]:B3`), behind the EP-ABI validation layer."""
    plain, layered = layer.split_spec(spec)
    if layered:
        target = load_target(plain, config)
        return layer.wrap(target, target.backend_option)
    if config is not None and not config.is_file():
        raise RacefuzzError(f"cannot read config '{config}': no such file")
    if is_builtin(spec):
        return builtin_targets.load(spec)
    path = config if config is not None else Path(DEFAULT_CONFIG)
    if config is None and not path.is_file():
        raise _unknown_target(spec, f"no {DEFAULT_CONFIG} in the current folder")
    reader = Reader(path)
    targets = reader.targets()
    for name in targets:
        if is_builtin(name):
            reader.fail(f"targets.{name}", f"'{name}' is a built-in target; pick another name")
    if spec not in targets:
        defined = ", ".join(targets) or "none"
        raise _unknown_target(spec, f"{reader.label} defines: {defined}")
    return reader.target(spec, targets[spec])


def with_models(target: Target, listed: str | None) -> Target:
    """The target running `--models` instead of its own (None: as it is)."""
    if listed is None:
        return target
    return replace(target, models=models.chosen(listed))


def _unknown_target(spec: str, config_part: str) -> RacefuzzError:
    bugs = f"B1,..,{builtin_targets.BUGS[-1]}"
    builtins = f"testbed[asan|tsan][:{bugs}], " + ", ".join(BUILTIN_TARGETS[1:])
    return RacefuzzError(f"unknown target '{spec}' (built-in: {builtins}; {config_part})")
