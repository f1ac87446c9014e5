"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def testbed_library() -> Path:
    """The testbed EP library, built on first use into the racefuzz cache (targets.testbed)."""
    from racefuzz.targets.testbed import library_path

    return library_path()
