"""Reading targets from a `racefuzz.toml`: the `[targets.NAME]` tables and what each key means.

Every config error is one `RacefuzzError` line naming the file and the dotted key. Paths are
relative to the config's folder and stored absolute, because workers may run elsewhere. The
model (`Target`, `Library`, `Profile`) lives in `target`; this module only reads files into it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from racefuzz.errors import RacefuzzError
from racefuzz.targets import layer, sanitizer
from racefuzz.targets.gpu import package_library
from racefuzz.targets.model import (
    CLUSTER_BY,
    DEVICE_TYPES,
    EXECUTION_MODES,
    THREAD_POOLS,
    Library,
    Profile,
    Target,
)
from racefuzz.targets.models import BUILTIN as BUILTIN_MODELS
from racefuzz.targets.models import DEFAULT_MODELS, ZOO_ALIAS, expand

_TARGET_KEYS = (
    "description",
    "models",
    "env",
    "trace",
    "tolerance",
    "cluster_by",
    "libraries",
    "profiles",
    "aliases",
    "layer",
    "backend_option",
)
_PROFILE_KEYS = (
    "library",
    "ep",
    "device",
    "vendor_id",
    "options",
    "intra_op_threads",
    "session_config",
    "device_index",
    "thread_pools",
    "execution_mode",
    "inter_op_threads",
)


class Reader:
    """Reads one config file; every error names the file and the dotted key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        self.folder = path.parent.resolve()

    def fail(self, key: str, message: str) -> NoReturn:
        raise RacefuzzError(f"{self.label}: {key}: {message}")

    def targets(self) -> dict[str, Any]:
        try:
            with self.path.open("rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise RacefuzzError(f"cannot read config '{self.label}': no such file") from None
        except OSError as e:
            raise RacefuzzError(f"cannot read config '{self.label}': {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            reason = " ".join(str(e).split())
            raise RacefuzzError(f"{self.label}: not valid TOML: {reason}") from None
        return self.table(data, "targets", "targets") if "targets" in data else {}

    def table(self, parent: Mapping[str, Any], name: str, key: str) -> dict[str, Any]:
        value = parent.get(name, {})
        if not isinstance(value, dict):
            self.fail(key, "must be a table")
        return value

    def only(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str) -> None:
        for name in table:
            if name not in allowed:
                self.fail(key, f"unknown key '{name}' (known: {', '.join(allowed)})")

    def strings(self, parent: Mapping[str, Any], name: str, key: str) -> dict[str, str]:
        """A table of strings; numbers are accepted and written as text (ORT wants strings)."""
        out: dict[str, str] = {}
        for k, v in self.table(parent, name, f"{key}.{name}").items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                self.fail(f"{key}.{name}", f"'{k}' must be a string or a number")
            out[k] = str(v)
        return out

    def target(self, name: str, raw: object) -> Target:
        key = f"targets.{name}"
        if not isinstance(raw, dict):
            self.fail(key, "must be a table")
        self.only(raw, _TARGET_KEYS, key)
        description, trace = raw.get("description", ""), raw.get("trace", False)
        if not isinstance(description, str):
            self.fail(key, "'description' must be a string")
        if not isinstance(trace, bool):
            self.fail(key, "'trace' must be true or false")
        libraries = tuple(
            self.library(f"{key}.libraries.{k}", k, v)
            for k, v in self.table(raw, "libraries", f"{key}.libraries").items()
        )
        known_libraries = {lib.name for lib in libraries}
        profiles = tuple(
            self.profile(f"{key}.profiles.{k}", k, v, known_libraries)
            for k, v in self.table(raw, "profiles", f"{key}.profiles").items()
        )
        if not profiles:
            self.fail(key, f"needs at least one profile ([{key}.profiles.NAME])")
        aliases = self.strings(raw, "aliases", key)
        profile_names = {p.name for p in profiles}
        for alias, to in aliases.items():
            if alias in profile_names:
                self.fail(f"{key}.aliases", f"'{alias}' is already a profile")
            if to not in profile_names:
                self.fail(f"{key}.aliases", f"'{alias}' names unknown profile '{to}'")
        layered, backend_option = raw.get("layer", False), raw.get("backend_option", "")
        if not isinstance(layered, bool):
            self.fail(key, "'layer' must be true or false")
        if not isinstance(backend_option, str):
            self.fail(key, "'backend_option' must be a string (a provider option's name)")
        target = Target(
            name=name,
            description=description,
            libraries=libraries,
            profiles=profiles,
            models=self.models(raw, key),
            env=self.strings(raw, "env", key),
            aliases=aliases,
            trace=trace,
            tolerance=self.tolerance(raw, key),
            cluster_by=self.cluster_by(raw, key),
            backend_option=backend_option,
        )
        # `layer = true`: always behind racefuzz's EP-ABI validation layer, as `NAME[layer]`.
        return layer.wrap(target, backend_option, name=name) if layered else target

    def cluster_by(self, raw: dict[str, Any], key: str) -> str:
        """`cluster_by = "overlap"`: one cluster per overlap-group shape (see Target)."""
        value = raw.get("cluster_by", "symptom")
        if value not in CLUSTER_BY:
            self.fail(key, f"'cluster_by' must be one of {', '.join(CLUSTER_BY)}")
        return str(value)

    def tolerance(self, raw: dict[str, Any], key: str) -> tuple[float, float] | None:
        """`tolerance = { rtol = 1e-3, atol = 1e-3 }`: how far outputs may differ from ORT's
        CPU EP (GPU float maths reassociates); both numbers, neither negative."""
        table = raw.get("tolerance")
        if table is None:
            return None
        if not isinstance(table, dict):
            self.fail(key, "'tolerance' must be a table { rtol = ..., atol = ... }")
        self.only(table, ("rtol", "atol"), f"{key}.tolerance")
        values = [table.get(k, 0.0) for k in ("rtol", "atol")]
        if not all(isinstance(v, int | float) and 0 <= v < 1 for v in values):
            self.fail(f"{key}.tolerance", "rtol and atol must be numbers in [0, 1)")
        return float(values[0]), float(values[1])

    def library(self, key: str, name: str, raw: object) -> Library:
        # A path, or a table {path = "...", sanitizer = "address" | "thread"}.
        # Or {package = "module"}: a Python package that ships the library and says where
        # (`get_library_path()`, as onnxruntime-ep-webgpu and nxrt-ep-cuda do).
        table = raw if isinstance(raw, dict) else {"path": raw}
        self.only(table, ("path", "package", "sanitizer"), key)
        raw, built_with = table.get("path"), table.get("sanitizer")
        package = table.get("package")
        if package is not None:
            if raw is not None or not isinstance(package, str) or not package:
                self.fail(key, "give either 'path' or 'package' (a module name), not both")
            try:
                raw = str(package_library(package, package, f"package '{package}'"))
            except RacefuzzError as e:
                self.fail(key, str(e))
        if not isinstance(raw, str) or not raw:
            self.fail(key, "must be the path of the EP library file")
        if built_with is not None:
            try:
                built_with = sanitizer.check_name(built_with)
            except RacefuzzError as e:
                self.fail(key, str(e))
        path = self.folder / Path(raw).expanduser()
        if not path.is_file():
            why = "not a file" if path.exists() else "no such file"
            self.fail(key, f"cannot load EP library '{path}': {why}")
        return Library(name, path, built_with, package=package)

    def profile(self, key: str, name: str, raw: object, libraries: set[str]) -> Profile:
        if not isinstance(raw, dict):
            self.fail(key, "must be a table")
        self.only(raw, _PROFILE_KEYS, key)
        library, ep, device = raw.get("library"), raw.get("ep"), raw.get("device")
        vendor, threads = raw.get("vendor_id"), raw.get("intra_op_threads")
        if ep is None:
            self.fail(key, "needs 'ep' (the EP name that onnxruntime.get_ep_devices() lists)")
        if not isinstance(ep, str) or not ep:
            self.fail(key, "'ep' must be a non-empty string")
        if library is not None and library not in libraries:
            self.fail(key, f"'library' names unknown library '{library}'")
        if device is not None and device not in DEVICE_TYPES:
            self.fail(key, f"'device' must be one of {', '.join(DEVICE_TYPES)}, not {device!r}")
        if vendor is not None and (not _is_int(vendor) or not 0 <= vendor < 2**32):
            self.fail(key, "'vendor_id' must be an integer such as 0x1002")
        if threads is not None and (not _is_int(threads) or threads < 1):
            self.fail(key, "'intra_op_threads' must be a positive integer")
        self.threading(raw, key)
        return Profile(
            name=name,
            library=library,
            ep_name=ep,
            provider_options=self.strings(raw, "options", key),
            device_type=device,
            vendor_id=vendor,
            intra_op_threads=threads,
            session_config=self.strings(raw, "session_config", key),
            device_index=raw.get("device_index"),
            thread_pools=raw.get("thread_pools", "session"),
            execution_mode=raw.get("execution_mode", "sequential"),
            inter_op_threads=raw.get("inter_op_threads"),
        )

    def threading(self, raw: Mapping[str, Any], key: str) -> None:
        """Checks the device and threading keys of a profile."""
        index, inter = raw.get("device_index"), raw.get("inter_op_threads")
        if index is not None and (not _is_int(index) or index < 0):
            self.fail(key, "'device_index' must be a device id, an integer >= 0")
        if inter is not None and (not _is_int(inter) or inter < 1):
            self.fail(key, "'inter_op_threads' must be a positive integer")
        for name, allowed in (("thread_pools", THREAD_POOLS), ("execution_mode", EXECUTION_MODES)):
            value = raw.get(name, allowed[0])
            if value not in allowed:
                self.fail(key, f"'{name}' must be one of {', '.join(allowed)}, not {value!r}")

    def models(self, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
        models = raw.get("models", list(DEFAULT_MODELS))
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            self.fail(key, "'models' must be a list of model names or .onnx paths")
        if not models:
            self.fail(key, "'models' must list at least one model")
        out: list[str] = []
        for model in models:
            if model == ZOO_ALIAS:  # every zoo model, but none twice
                out += [m for m in expand([model]) if m not in out]
                continue
            if model in BUILTIN_MODELS:
                out.append(model)
                continue
            path = self.folder / Path(model).expanduser()
            if not path.is_file():
                self.fail(f"{key}.models", f"model '{model}' not found")
            out.append(str(path))
        return tuple(out)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
