"""The EP-ABI validation layer (`racefuzz/layer/`, C++): any target's `[layer]` flavour.

The layer is a plugin EP library registered in the real one's place: it loads the real library,
hands ORT a proxy for every ABI object that library returns, forwards every call, and writes a
JSON line per broken ownership rule (a copy or kernel handling another backend's memory, a free
through the wrong allocator, a use after free or release) to the run's report file, which the
`abi` oracle reads. `wrap` turns a target into its layered flavour: each plugin library's path
becomes the layer's, the real path goes to the layer through the environment, and the target's
`adaptations` say so (doctor, env.json, report.md).

Built on first use against the ORT headers the testbed builds with, into
`<cache>/layer/<hash of the sources>/`.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import replace
from pathlib import Path

from racefuzz.c_compiler import compile_shared
from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError
from racefuzz.targets.model import Library, Target

SOURCES = Path(__file__).resolve().parent.parent / "layer"
FLAVOUR = "layer"
ENV_PREFIX = "RACEFUZZ_LAYER_"


def env_name(registration: str) -> str:
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", registration).upper()


def _sources() -> list[Path]:
    return sorted([*SOURCES.glob("*.cc"), *SOURCES.glob("*.h")])


def library(who: str) -> Path:
    """The built layer; `who` starts the error line when it cannot be built."""
    if not sys.platform.startswith("linux"):
        raise RacefuzzError(f"{who} needs racefuzz's EP-ABI layer, built on Linux only so far")
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    built = cache_root() / "layer" / digest.hexdigest()[:16] / "libracefuzz_layer.so"
    if built.is_file():
        return built
    # Imported here: the testbed module imports the built-in targets, which import this one.
    from racefuzz.targets import testbed

    include = testbed.headers(lambda line: print(line, file=sys.stderr, flush=True))
    print("racefuzz: building the EP-ABI layer…", file=sys.stderr, flush=True)
    cc = [p for p in _sources() if p.suffix == ".cc"]
    if not compile_shared(cc, built, includes=(include,), libs=("dl", "pthread")):
        raise RacefuzzError(
            f"{who} needs racefuzz's EP-ABI layer, and no C++17 compiler built "
            f"{SOURCES} (install g++, or set CXX)"
        )
    return built


def wrap(target: Target, backend_option: str = "", name: str | None = None) -> Target:
    """`target` with every plugin library behind the layer, named `name` (default: the target's
    with `[layer]`). `backend_option` names the provider option whose value is an EP
    instance's backend (the testbed's `profile`); without one, every instance of an EP is one
    backend."""
    if target.layer:
        return target  # `layer = true` in racefuzz.toml and `[layer]` on the command line
    name = layered_name(target.name) if name is None else name
    built = library(f"target '{name}'")
    env = dict(target.env)
    libraries = []
    for lib in target.libraries:
        if lib.sanitizer is not None:
            raise RacefuzzError(f"target '{name}': the layer is not built with {lib.sanitizer}")
        config = f"library={lib.path}"
        if backend_option:
            config += f";backend_option={backend_option}"
        env[env_name(lib.name)] = config
        libraries.append(Library(lib.name, built, lib.sanitizer, lib.forwards_to or lib.path))
    said = tuple(
        f"'{lib.name}' is racefuzz's EP-ABI validation layer in front of {lib.path}"
        for lib in target.libraries
    )
    return replace(
        target,
        name=name,
        libraries=tuple(libraries),
        env=env,
        layer=True,
        backend_option=backend_option,
        trace=False,  # the layer sees from outside; the testbed's own trace is for comparing
        adaptations=(*target.adaptations, *said),
        description=f"{target.description}, behind racefuzz's EP-ABI validation layer",
    )


def layered_name(name: str) -> str:
    """`testbed:B3` -> `testbed[layer]:B3`; `webgpu-cpu` -> `webgpu-cpu[layer]`."""
    head, colon, tail = name.partition(":")
    return f"{head}[{FLAVOUR}]{colon}{tail}"


def split_spec(spec: str) -> tuple[str, bool]:
    """A target spec without its `[layer]`, and whether it had one."""
    head, colon, tail = spec.partition(":")
    marker = f"[{FLAVOUR}]"
    if marker not in head:
        return spec, False
    return head.replace(marker, "", 1) + colon + tail, True


def unwrap(target: Target) -> Target:
    """The target `wrap` was given (its libraries, its environment), for writing it back as a
    racefuzz.toml table with `layer = true`; its testbed trace stays off."""
    libraries, env = [], dict(target.env)
    for lib in target.libraries:
        config = env.pop(env_name(lib.name), "")
        real = dict(part.split("=", 1) for part in config.split(";") if "=" in part)
        path = Path(real["library"]) if "library" in real else lib.path
        forwards = lib.forwards_to if lib.forwards_to != path else None
        libraries.append(Library(lib.name, path, lib.sanitizer, forwards))
    plain, _ = split_spec(target.name)
    return replace(target, name=plain, libraries=tuple(libraries), env=env, layer=False)
