"""How a campaign writes to its output folder: a full or failing disk stops the campaign (the
folder failing is not racefuzz failing), and the summary still gets the room the reserve file
kept (`disk_reserve`). Mixed into `Campaign` (`loop.py`), whose attributes it uses."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from racefuzz.campaign.disk_reserve import Reserve
from racefuzz.campaign.state import CampaignState

# The output folder failing, not racefuzz: the campaign stops and writes what it can.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES})


class FolderWrites:
    out_dir: Path
    state: CampaignState
    persist: Callable[[], None] | None
    write_error: str
    reserve: Reserve | None

    def note(self, line: str) -> None:
        raise NotImplementedError  # `Campaign.note`

    def _cancel_now(self) -> None:
        raise NotImplementedError  # `Campaign._cancel_now`

    def _bundles(self) -> set[Path]:
        # list() copies at once: the trio thread may open a cluster while a shrink thread asks.
        return {r.bundle for r in list(self.state.findings.values()) if r.bundle is not None}

    def _persist(self) -> None:
        if self.persist is not None and not self.write_error:
            self._writing(self.persist)

    def _writing(self, write: Callable[[], None]) -> None:
        """Write to the output folder; a full (or failing) disk stops the campaign, and the
        write is tried once more in the room the reserve file held (`disk_reserve`)."""
        try:
            write()
        except OSError as e:
            if not self._output_failed(e):
                raise
            try:
                write()
            except OSError:
                self.note(f"could not write under {self.out_dir} even after freeing the reserve")

    def _output_failed(self, error: OSError) -> bool:
        """True (and the campaign stops) when `error` is the output folder failing."""
        if error.errno not in OUTPUT_ERRNOS:
            return False
        if not self.write_error:
            self.write_error = f"{error.strerror or error}"
            self.note(f"cannot write under {self.out_dir}: {self.write_error}; stopping")
            if self.reserve is not None:
                self.reserve.release()
            self._cancel_now()
        return True
