"""racefuzz.targets.testbed: building the testbed EP into the cache, and its errors."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from racefuzz.cache import cache_root
from racefuzz.errors import RacefuzzError
from racefuzz.targets import builtin as builtin_targets
from racefuzz.targets import testbed


def _seed_headers(cache: Path) -> None:
    """Puts the default cache's header tarball into `cache`, so a test build needs no download."""
    source = cache_root() / "ort-headers" / testbed.HEADERS_TARBALL
    if not source.is_file():
        return  # the build will fetch it
    store = cache / "ort-headers"
    store.mkdir(parents=True)
    try:
        os.link(source, store / testbed.HEADERS_TARBALL)
    except OSError:
        shutil.copy2(source, store / testbed.HEADERS_TARBALL)


def _tool_dir(tmp_path: Path, *tools: str) -> Path:
    """A PATH folder holding only links to `tools`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None, f"{tool} is needed for this test"
        (folder / tool).symlink_to(found)
    return folder


@pytest.mark.slow
def test_library_path_builds_once_then_hits_the_cache(
    testbed_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    _seed_headers(cache)  # before RACEFUZZ_CACHE moves the default cache
    monkeypatch.setenv("RACEFUZZ_CACHE", str(cache))
    lines: list[str] = []

    built = testbed.library_path(lines.append)

    assert built.is_file()
    assert built.name == testbed.library_file_name()
    assert built.is_relative_to(cache / "testbed")
    assert "racefuzz: building testbed EP…" in lines
    # The build says how far it is, file by file (CMake's percentages), not one silent minute.
    steps = [line for line in lines if line.startswith("racefuzz: the testbed build [")]
    assert len(steps) >= 5 and steps[-1].endswith("[100%] linking"), lines
    assert (cache / "ort-headers" / "0.4.9" / "Headers" / "onnxruntime_c_api.h").is_file()

    again: list[str] = []
    started = time.monotonic()
    assert testbed.library_path(again.append) == built
    assert time.monotonic() - started < 5.0  # a cache hit: no build (and `again` is silent)
    assert again == []


def test_the_library_name_follows_the_platform() -> None:
    expected = {"win32": "racefuzz_testbed.dll", "darwin": "libracefuzz_testbed.dylib"}
    assert testbed.library_file_name() == expected.get(sys.platform, "libracefuzz_testbed.so")


def test_missing_cmake_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACEFUZZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path)))

    with pytest.raises(testbed.TestbedBuildError) as caught:
        testbed.library_path(lambda line: None)

    assert str(caught.value) == "cannot build the testbed EP: 'cmake' is not on PATH"
    assert isinstance(caught.value, RacefuzzError)


def test_missing_npm_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACEFUZZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, "cmake", "c++")))

    with pytest.raises(
        testbed.TestbedBuildError, match=r"^cannot fetch the ORT headers: 'npm' is not on PATH$"
    ):
        testbed.library_path(lambda line: None)


def test_a_tarball_that_fails_its_integrity_check_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "cache" / "ort-headers"
    store.mkdir(parents=True)
    (store / testbed.HEADERS_TARBALL).write_bytes(b"not the package")
    monkeypatch.setenv("RACEFUZZ_CACHE", str(tmp_path / "cache"))

    with pytest.raises(testbed.TestbedBuildError, match=r"fails its integrity check"):
        testbed.library_path(lambda line: None)


def test_a_failed_build_reports_the_compiler_output(
    testbed_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = cache_root() / "ort-headers" / "0.4.9" / "Headers"
    sources = tmp_path / "testbed"
    shutil.copytree(Path(testbed.__file__).resolve().parents[2] / "testbed", sources)
    (sources / "entry.cc").write_text("this is not C++;\n")  # compiled first: fails fast
    cache = tmp_path / "cache"
    shutil.copytree(headers, cache / "ort-headers" / "0.4.9" / "Headers")
    monkeypatch.setenv("RACEFUZZ_CACHE", str(cache))
    monkeypatch.setattr(testbed, "_SOURCES", sources)

    with pytest.raises(testbed.TestbedBuildError) as caught:
        testbed.library_path(lambda line: None)

    message = str(caught.value)
    assert message.startswith("the testbed build failed (exit status")
    assert "entry.cc" in message


def test_the_cache_key_follows_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = tmp_path / "testbed"
    shutil.copytree(Path(testbed.__file__).resolve().parents[2] / "testbed", sources)
    monkeypatch.setattr(testbed, "_SOURCES", sources)
    before = testbed._source_key()
    (sources / "README.md").write_text("changed\n")
    assert testbed._source_key() != before
    # A sanitizer flavour is its own build; the plain key has no flavour in it.
    assert (
        len({testbed._source_key(), testbed._source_key("asan"), testbed._source_key("tsan")}) == 3
    )


def test_bug_env_names_the_switches_in_order() -> None:
    assert testbed.bug_env(["b3", "B1", "B3"]) == {"RACEFUZZ_TESTBED_BUGS": "B1,B3"}
    assert testbed.bug_env([]) == {"RACEFUZZ_TESTBED_BUGS": ""}
    # Every switch the native sources number (`// Bn:` in bugs.h) is one the target accepts.
    header = (Path(testbed.__file__).resolve().parents[2] / "testbed" / "bugs.h").read_text()
    numbered = sorted({int(n) for n in re.findall(r"// B(\d+):", header)})
    assert tuple(f"B{i}" for i in numbered) == builtin_targets.BUGS


def test_bug_env_rejects_an_unknown_switch() -> None:
    with pytest.raises(
        RacefuzzError,
        match=r"^unknown testbed bug 'B99' \(known: B1, B2, B3, .*, B9, B10, .*B24\)$",
    ):
        testbed.bug_env(["B99"])


def test_a_silent_build_step_still_reports_that_it_is_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(testbed, "HEARTBEAT_S", 0.5)
    lines: list[str] = []
    testbed._run(
        [sys.executable, "-c", "import time; time.sleep(2.2)"], tmp_path, "npm pack", lines.append
    )
    assert any(line.startswith("racefuzz: npm pack still running (") for line in lines), lines
