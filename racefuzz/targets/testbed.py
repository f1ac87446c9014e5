"""Builds the testbed EP (`testbed/`, C++) on first use and finds it afterwards.

`library_path()` returns the shared library, building it into a cache keyed by a hash of every
file under `testbed/` plus the ORT header package version, so an edited source rebuilds and an
unchanged one never does. The cache root is `$RACEFUZZ_CACHE` or `~/.cache/racefuzz`:
- `ort-headers/`: the npm tarball `com.github.asus4.onnxruntime-0.4.9.tgz` (ORT 1.29 C headers,
  `ORT_API_VERSION` 29, EP ABI included; fetched once with `npm pack`, checked against its npm
  sha512 integrity) and the `Headers/` folder extracted from it. Headers are never committed.
- `testbed/<key>/`: the built library, moved into place atomically. A sanitizer flavour
  (`FLAVOURS`: `asan`, `tsan`) is part of the key and builds with `-fsanitize=...`.
One lock file serialises builds, so two processes starting at once build once.

What it does not do: pick bug switches (that is `bug_env()`, read by the library at load) or
load the library into ORT (the worker does, in a fresh process per schedule).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError
from racefuzz.targets.bug_switches import BUGS, BUGS_ENV

# Flavour -> the -fsanitize value it builds with (and the sanitizer its library declares).
FLAVOURS: dict[str, str] = {"asan": "address", "tsan": "thread"}

HEADERS_PACKAGE = "com.github.asus4.onnxruntime@0.4.9"
HEADERS_TARBALL = "com.github.asus4.onnxruntime-0.4.9.tgz"
HEADERS_INTEGRITY = (
    "sha512-"
    "BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=="
)
# Where the package keeps the C headers (one copy of several; all are the same).
_HEADERS_IN_TARBALL = (
    "package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers/"
)
_SOURCES = Path(__file__).resolve().parents[2] / "testbed"
# The fixed design's residual R1, filed: what `racefuzz run` on the plain testbed finds.
KNOWN_ISSUES = _SOURCES / "known-issues.json"
_TAIL_LINES = 40

Progress = Callable[[str], None]


class TestbedBuildError(RacefuzzError):
    """The testbed EP cannot be built here: a missing tool, bad headers or a failed compile."""

    __test__ = False  # not a pytest test class, despite the name


def bug_env(bugs: Iterable[str]) -> dict[str, str]:
    """The environment setting that switches `bugs` on in a process that loads the library.

    Always names the variable, even for no bugs, so that a value inherited from the user's shell
    cannot switch bugs on unnoticed."""
    chosen = []
    for bug in bugs:
        name = bug.strip().upper()
        if name not in BUGS:
            raise RacefuzzError(f"unknown testbed bug '{bug}' (known: {', '.join(BUGS)})")
        if name not in chosen:
            chosen.append(name)
    return {BUGS_ENV: ",".join(b for b in BUGS if b in chosen)}


def library_file_name() -> str:
    """What CMake calls a shared library named racefuzz_testbed on this platform."""
    if sys.platform == "win32":
        return "racefuzz_testbed.dll"
    if sys.platform == "darwin":
        return "libracefuzz_testbed.dylib"
    return "libracefuzz_testbed.so"


def library_path(progress: Progress | None = None, flavour: str = "") -> Path:
    """The testbed EP library, built on first use (progress lines go to `progress`, default
    stderr); `flavour` one of FLAVOURS for a sanitizer build. Raises TestbedBuildError when it
    cannot be built."""
    if flavour and flavour not in FLAVOURS:
        raise RacefuzzError(f"unknown testbed flavour '{flavour}' (known: {', '.join(FLAVOURS)})")
    report = progress if progress is not None else _print_to_stderr
    target = cache_root() / "testbed" / _source_key(flavour) / library_file_name()
    if target.is_file():
        return target
    with _locked(cache_root() / "testbed.lock", report):
        if target.is_file():  # another process built it while we waited
            return target
        cmake = _require_build_tools()
        include = headers(report)
        report(f"racefuzz: building testbed EP{f' ({flavour})' if flavour else ''}…")
        _build(cmake, include, target, FLAVOURS.get(flavour, ""), report)
    return target


# --- the cache key ------------------------------------------------------------------------------


def _source_files() -> list[Path]:
    if not (_SOURCES / "CMakeLists.txt").is_file():
        raise TestbedBuildError(
            f"the testbed sources are not at {_SOURCES}; install racefuzz from a checkout "
            "(pip install -e .)"
        )
    skipped = {"build", "__pycache__"}
    return sorted(
        p
        for p in _SOURCES.rglob("*")
        if p.is_file()
        and not any(
            part in skipped or part.startswith(".") for part in p.relative_to(_SOURCES).parts
        )
    )


def _source_key(flavour: str = "") -> str:
    digest = hashlib.sha256()
    # The platform is part of the key: one cache may be shared by machines of several kinds.
    # The plain build hashes no flavour, so its key is what it was before flavours existed.
    flavoured = [flavour] if flavour else []
    for part in (HEADERS_PACKAGE, sys.platform, platform.machine(), *flavoured):
        digest.update(part.encode() + b"\0")
    for path in _source_files():
        digest.update(path.relative_to(_SOURCES).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


# --- tools, headers, build ----------------------------------------------------------------------


def _require_build_tools() -> str:
    cmake = shutil.which("cmake")
    if cmake is None:
        raise TestbedBuildError("cannot build the testbed EP: 'cmake' is not on PATH")
    # On Windows CMake finds MSVC through Visual Studio, not PATH.
    if sys.platform != "win32":
        candidates = [os.environ.get("CXX", ""), "c++", "g++", "clang++"]
        if not any(c and shutil.which(c) for c in candidates):
            raise TestbedBuildError(
                "cannot build the testbed EP: no C++ compiler (c++, g++ or clang++) is on PATH"
            )
    return cmake


def headers(report: Progress) -> Path:
    """The extracted ORT Headers folder, fetching and checking the tarball when needed (the
    forwarding libraries of `targets.forwarding` build against it too)."""
    store = cache_root() / "ort-headers"
    headers = store / HEADERS_PACKAGE.rsplit("@", 1)[1] / "Headers"
    if (headers / "onnxruntime_c_api.h").is_file():
        return headers
    store.mkdir(parents=True, exist_ok=True)
    tarball = store / HEADERS_TARBALL
    if not tarball.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise TestbedBuildError("cannot fetch the ORT headers: 'npm' is not on PATH")
        report("racefuzz: fetching ORT headers (150 MB, once)…")
        with tempfile.TemporaryDirectory(dir=store, prefix="fetch-") as tmp:
            _run([npm, "pack", HEADERS_PACKAGE, "--silent"], Path(tmp), "npm pack", report)
            fetched = Path(tmp) / HEADERS_TARBALL
            if not fetched.is_file():
                raise TestbedBuildError(f"npm pack did not produce {HEADERS_TARBALL}")
            _check_integrity(fetched)
            os.replace(fetched, tarball)
    else:
        _check_integrity(tarball)
    report("racefuzz: unpacking ORT headers…")
    with tempfile.TemporaryDirectory(dir=store, prefix="unpack-") as tmp:
        staged = Path(tmp) / "Headers"
        with tarfile.open(tarball, "r:gz") as archive:
            archive.extractall(staged, filter=_only_headers)
        if not (staged / "onnxruntime_c_api.h").is_file():
            raise TestbedBuildError(
                f"{tarball} has no onnxruntime_c_api.h under its Headers folder"
            )
        headers.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, headers)
    return headers


def _check_integrity(tarball: Path) -> None:
    digest = hashlib.sha512()
    with tarball.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    found = "sha512-" + base64.b64encode(digest.digest()).decode()
    if found != HEADERS_INTEGRITY:
        raise TestbedBuildError(
            f"{tarball} fails its integrity check (got {found[:20]}…, expected "
            f"{HEADERS_INTEGRITY[:20]}…); delete it to fetch it again"
        )


def _only_headers(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    # Only the Headers folder, flattened, and through the "data" filter (no links out, no
    # absolute paths, no special files).
    if not member.name.startswith(_HEADERS_IN_TARBALL) or member.name == _HEADERS_IN_TARBALL:
        return None
    return tarfile.data_filter(member.replace(name=member.name[len(_HEADERS_IN_TARBALL) :]), dest)


def _build(cmake: str, headers: Path, target: Path, sanitizer: str, report: Progress) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent.parent, prefix="build-") as tmp:
        build = Path(tmp)
        _run(
            [
                cmake,
                "-S",
                str(_SOURCES),
                "-B",
                str(build),
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DORT_HEADERS_DIR={headers}",
                f"-DRACEFUZZ_SANITIZER={sanitizer}",
            ],
            cwd=build,
            what="cmake configure",
        )
        # Two jobs: the machines racefuzz runs on are often small, and the build is short.
        _run(
            [cmake, "--build", str(build), "--config", "Release", "-j", "2"],
            cwd=build,
            what="the testbed build",
            report=report,
        )
        built = next(iter(build.rglob(library_file_name())), None)
        if built is None:
            raise TestbedBuildError(f"the build produced no {library_file_name()}")
        staged = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.copy2(built, staged)
        os.replace(staged, target)


_PERCENT = re.compile(r"^\[\s*(\d+)%\]\s+(?:Building \w+ object .*?([\w.]+)\.o$|(Linking).*)")
HEARTBEAT_S = 10.0  # a step that prints nothing (npm fetching 150 MB) still says it is alive


def _run(cmd: list[str], cwd: Path, what: str, report: Progress | None = None) -> None:
    """Run a build step; its progress (CMake's percentages, else a line every HEARTBEAT_S)
    goes to `report`, its output tail into the error when it fails."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    started = time.monotonic()
    quiet = threading.Event()
    said = [started]

    def heartbeat() -> None:
        while not quiet.wait(1.0):
            if report is not None and time.monotonic() - said[0] >= HEARTBEAT_S:
                said[0] = time.monotonic()
                report(f"racefuzz: {what} still running ({said[0] - started:.0f} s)…")

    threading.Thread(target=heartbeat, daemon=True).start()
    lines: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            m = _PERCENT.match(lines[-1])
            if m is not None and report is not None:
                said[0] = time.monotonic()
                report(f"racefuzz: {what} [{m.group(1)}%] {m.group(2) or 'linking'}")
        returncode = proc.wait()
    finally:
        quiet.set()
    if returncode != 0:
        tail = "\n".join(lines[-_TAIL_LINES:])
        raise TestbedBuildError(f"{what} failed (exit status {returncode}):\n{tail}")


# --- locking ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path, report: Progress) -> Iterator[None]:
    """An exclusive lock on `path` across processes, held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as f:
        if sys.platform == "win32":
            import msvcrt

            f.seek(0)
            try:
                msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
            except OSError:
                report("racefuzz: waiting for another process building the testbed EP…")
                while True:
                    try:
                        msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)  # retries for ~10 s
                        break
                    except OSError:
                        continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                report("racefuzz: waiting for another process building the testbed EP…")
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _print_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
