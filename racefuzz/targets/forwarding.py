"""The forwarding library (`racefuzz/native/forward.c`): registered in a real EP's place, it
loads that EP and changes only what the EP is told of the CPU hardware device (its type, its
vendor id), so that an EP which takes only GPUs, or only one vendor's CPUs, offers a device on
any Linux machine. ORT itself still sees the real devices.

Built on first use against the ORT headers the testbed builds with (`testbed.headers`), into
`<cache>/forward/<hash of the source>/`. A target that uses it states each change in its
`adaptations` (shown by doctor, kept in every bundle's env.json and report.md).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from racefuzz.c_compiler import compile_shared
from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError

SOURCE = Path(__file__).resolve().parent.parent / "native" / "forward.c"
ENV_PREFIX = "RACEFUZZ_FORWARD_"
VENDOR_IDS = {"intel": 0x8086, "amd": 0x1022, "nvidia": 0x10DE}


@dataclass(frozen=True)
class Forwarding:
    """What the library changes for the EP registered as `name`, and how it reaches it."""

    name: str  # the registration name (a Library's name)
    real: Path  # the EP library it loads
    cpu_type: str | None = None  # "gpu" | "npu": what the EP is told a CPU device is
    cpu_vendor_id: int | None = None  # what the EP is told a CPU's vendor id is
    preload: Sequence[Path] = ()  # opened first (RTLD_GLOBAL), e.g. a Vulkan loader

    def env(self) -> dict[str, str]:
        """The variable the library reads its configuration from."""
        parts = [f"library={self.real}"]
        if self.preload:
            parts.append("preload=" + ":".join(str(p) for p in self.preload))
        if self.cpu_type is not None:
            parts.append(f"cpu_type={self.cpu_type}")
        if self.cpu_vendor_id is not None:
            parts.append(f"cpu_vendor_id={self.cpu_vendor_id:#06x}")
        return {env_name(self.name): ";".join(parts)}

    def adaptations(self) -> tuple[str, ...]:
        """Each change, in words, for doctor and every bundle."""
        out = [f"'{self.name}' is racefuzz's forwarding library in front of {self.real}"]
        if self.cpu_type is not None:
            out.append(f"the EP is told the CPU hardware device is a {self.cpu_type.upper()}")
        if self.cpu_vendor_id is not None:
            out.append(f"the EP is told the CPU's vendor id is {self.cpu_vendor_id:#06x}")
        out += [f"{p.name} is loaded before the EP ({p})" for p in self.preload]
        return tuple(out)


def env_name(registration: str) -> str:
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", registration).upper()


def library(who: str) -> Path:
    """The built forwarding library; `who` starts the error line when it cannot be built."""
    if not sys.platform.startswith("linux"):
        raise RacefuzzError(f"{who} needs racefuzz's forwarding library, built on Linux only")
    key = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    built = cache_root() / "forward" / key / "libracefuzz_forward.so"
    if built.is_file():
        return built
    # Imported here: the testbed module imports the built-in targets, which import this one.
    from racefuzz.targets import testbed

    include = testbed.headers(lambda line: print(line, file=sys.stderr, flush=True))
    if not compile_shared(SOURCE, built, includes=(include,), libs=("dl", "pthread")):
        raise RacefuzzError(
            f"{who} needs racefuzz's forwarding library, and no C compiler built {SOURCE.name} "
            "(install gcc, or set CC)"
        )
    return built
