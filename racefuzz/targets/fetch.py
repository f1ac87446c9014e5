"""Fetching what a built-in target needs into racefuzz's cache, without touching the system.

- A wheel: `pip download --no-deps` of one pinned version, unpacked (a wheel is a zip) into
  `<cache>/targets/wheels/<name>-<version>/`. Never installed: pip would pull an onnxruntime
  the EP pins (onnxruntime-ggml wants one below 1.31) over the one racefuzz runs.
- Debian packages: `apt-get --download-only install` with a private sources list, lists and
  archive folder (so apt resolves against what the machine has installed and fetches only the
  missing or too old), each `.deb` unpacked with `dpkg -x` into one root
  `<cache>/targets/debian/<name>/`. Nothing is installed; no root rights are needed.

Each step is done once: a finished folder holds a `.complete` stamp, and a half-done one (a
killed setup) is redone. Progress lines go to `report`; a failure is one `RacefuzzError` line
naming the command and the tail of what it said.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError

Progress = Callable[[str], None]
STAMP = ".complete"
# Debian's own repositories: bookworm's Mesa (22.3) is too old for Dawn, its backports' is not.
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-backports main",
)
_TIMEOUT_S = 900


def store() -> Path:
    return cache_root() / "targets"


def wheel_dir(package: str, version: str) -> Path:
    return store() / "wheels" / f"{package}-{version}"


def debian_root(name: str) -> Path:
    return store() / "debian" / name


def complete(folder: Path) -> bool:
    return (folder / STAMP).is_file()


def wheel(package: str, version: str, report: Progress) -> Path:
    """The unpacked wheel of `package==version`, downloaded the first time."""
    dest = wheel_dir(package, version)
    if complete(dest):
        report(f"racefuzz setup: {package} {version}: already in {dest}")
        return dest
    report(f"racefuzz setup: downloading {package} {version} (pip download --no-deps)…")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        _run([*pip, "-q", "-d", tmp, f"{package}=={version}"], "pip download")
        (whl,) = Path(tmp).glob("*.whl") or _none(package)
        report(f"racefuzz setup: unpacking {whl.name} ({whl.stat().st_size / 2**20:.1f} MB)…")
        staged = Path(tmp) / "unpacked"
        with zipfile.ZipFile(whl) as archive:
            archive.extractall(staged)
        for member in staged.rglob("*.so*"):
            member.chmod(0o755)  # zip keeps no modes here: a library must be readable
        (staged / STAMP).write_text(whl.name + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(staged, dest)
    report(f"racefuzz setup: {package} {version} is in {dest}")
    return dest


def _none(package: str) -> list[Path]:
    raise RacefuzzError(f"pip download gave no wheel of {package} for this machine")


def debian_packages(name: str, packages: Sequence[str], report: Progress) -> Path:
    """A root folder with `packages` (apt names, `pkg/release` allowed) and whatever of their
    dependencies this machine lacks or has too old, unpacked under it."""
    root = debian_root(name)
    if complete(root):
        report(f"racefuzz setup: {', '.join(packages)}: already in {root}")
        return root
    apt_get, dpkg = shutil.which("apt-get"), shutil.which("dpkg")
    if apt_get is None or dpkg is None:
        raise RacefuzzError(
            f"racefuzz setup needs apt-get and dpkg (a Debian-like Linux) for {', '.join(packages)}"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        options = _apt_options(work)
        report("racefuzz setup: reading Debian's package lists (bookworm, bookworm-backports)…")
        _run([apt_get, *options, "-q", "update"], "apt-get update")
        report(f"racefuzz setup: downloading {', '.join(packages)} and what they need…")
        cmd = [apt_get, *options, "-q", "-y", "--download-only", "--no-install-recommends"]
        _run([*cmd, "install", *packages], "apt-get install --download-only")
        debs = sorted((work / "cache" / "archives").glob("*.deb"))
        staged = work / "root"
        staged.mkdir()
        for deb in debs:
            report(f"racefuzz setup: unpacking {deb.name}")
            _run([dpkg, "-x", str(deb), str(staged)], "dpkg -x")
        names = "".join(f"{deb.name}\n" for deb in debs)
        (staged / STAMP).write_text(names, encoding="utf-8")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(staged, root)
    report(f"racefuzz setup: {len(debs)} Debian package(s) unpacked in {root}")
    return root


def _apt_options(work: Path) -> list[str]:
    """apt's own folders moved under `work`: the machine's sources, lists and locks untouched."""
    (work / "lists" / "partial").mkdir(parents=True)
    (work / "cache" / "archives" / "partial").mkdir(parents=True)
    sources = work / "sources.list"
    sources.write_text("".join(f"{line}\n" for line in DEBIAN_SOURCES), encoding="utf-8")
    # As root apt downloads as user _apt, who may not enter a private temporary folder.
    sandbox = ["-oAPT::Sandbox::User=root"] if os.geteuid() == 0 else []
    return [
        *sandbox,
        f"-oDir::Etc::SourceList={sources}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={work / 'lists'}",
        f"-oDir::Cache={work / 'cache'}",
        "-oDebug::NoLocking=1",
    ]


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RacefuzzError(f"racefuzz setup: {what} failed: {e}") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[-300:]
        raise RacefuzzError(f"racefuzz setup: {what} failed (exit {done.returncode}): {said}")
