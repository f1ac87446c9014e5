"""Declaring a library built with a sanitizer: racefuzz.toml, the target model, bundles' tables,
the worker's environment, and bad input as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import one_error_line, racefuzz

from racefuzz.campaign import known_issues
from racefuzz.errors import RacefuzzError
from racefuzz.execute import executor
from racefuzz.targets import sanitizer
from racefuzz.targets.model import Library, Profile, Target
from racefuzz.targets.registry import load_target
from racefuzz.targets.toml_io import target_toml

TSAN_RUNTIME = sanitizer.available("thread")


def config(tmp_path: Path, library_value: str) -> Path:
    (tmp_path / "libep.so").write_bytes(b"")
    path = tmp_path / "racefuzz.toml"
    path.write_text(
        f"[targets.mine.libraries]\nep = {library_value}\n"
        '[targets.mine.profiles.p]\nlibrary = "ep"\nep = "MyEp"\n',
        encoding="utf-8",
    )
    return path


def test_a_library_table_declares_its_sanitizer(tmp_path: Path) -> None:
    path = config(tmp_path, '{ path = "libep.so", sanitizer = "thread" }')
    target = load_target("mine", path)
    assert target.libraries == (Library("ep", tmp_path / "libep.so", "thread"),)
    assert target.sanitizer == "thread"
    assert Target.from_json(target.to_json()) == target


def test_a_plain_path_is_a_library_without_a_sanitizer(tmp_path: Path) -> None:
    target = load_target("mine", config(tmp_path, '"libep.so"'))
    assert target.sanitizer is None and "sanitizer" not in target.to_json()["libraries"][0]


def test_a_sanitized_target_survives_the_bundles_toml(tmp_path: Path) -> None:
    (tmp_path / "libep.so").write_bytes(b"")
    target = Target(
        "mine",
        (Library("ep", tmp_path / "libep.so", "address"),),
        (Profile("p", "ep", "MyEp", {}),),
        ("tiny",),
    )
    (tmp_path / "bundle.toml").write_text(target_toml(target), encoding="utf-8")
    assert load_target("mine", tmp_path / "bundle.toml") == target


def test_an_unknown_sanitizer_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = config(tmp_path, '{ path = "libep.so", sanitizer = "memory" }')
    with pytest.raises(RacefuzzError) as e:
        load_target("mine", path)
    assert str(e.value) == (
        f"{path}: targets.mine.libraries.ep: sanitizer must be one of 'address', 'thread', "
        "not 'memory'"
    )
    line = one_error_line(racefuzz("doctor", "--config", str(path), "--target", "mine"))
    assert line.endswith("sanitizer must be one of 'address', 'thread', not 'memory'")


def test_two_sanitizers_cannot_share_a_process(tmp_path: Path) -> None:
    with pytest.raises(RacefuzzError, match=r"built with different sanitizers \(address, thread\)"):
        Target(
            "two",
            (Library("a", tmp_path / "a.so", "address"), Library("b", tmp_path / "b.so", "thread")),
            (Profile("p", "a", "A", {}),),
            ("tiny",),
        )


def test_unknown_flavours_are_one_line() -> None:
    line = one_error_line(racefuzz("doctor", "--target", "testbed[msan]"))
    assert line == (
        "racefuzz: error: unknown flavour in target 'testbed[msan]' "
        "(known: testbed[asan], testbed[tsan], openvino[as-intel])"
    )
    assert "unknown flavour" in one_error_line(racefuzz("doctor", "--target", "cpu[tsan]"))


def test_a_missing_runtime_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CC", "")
    sanitizer._compiler_file.cache_clear()
    try:
        with pytest.raises(RacefuzzError, match=r"^cannot find the thread sanitizer runtime"):
            sanitizer.env("thread")
    finally:
        sanitizer._compiler_file.cache_clear()


def test_the_known_issues_key_strips_flavour_and_switches() -> None:
    assert known_issues.target_key("testbed[tsan]:B9") == "testbed"
    assert known_issues.target_key("testbed[asan]") == "testbed"


@pytest.mark.skipif(not TSAN_RUNTIME, reason="no ThreadSanitizer runtime (libtsan) here")
def test_the_worker_preloads_the_runtime_with_racefuzz_options(tmp_path: Path) -> None:
    target = Target(
        "mine",
        (Library("ep", tmp_path / "libep.so", "thread"),),
        (Profile("p", "ep", "MyEp", {}),),
        ("tiny",),
        env={"MY_EP_LOG": "1"},
    )
    env = executor.worker_env(target, None)
    assert env["LD_PRELOAD"] == str(sanitizer.runtime("thread"))
    assert env["MY_EP_LOG"] == "1" and env["DEBUGINFOD_URLS"] == ""
    options = env["TSAN_OPTIONS"]
    assert "halt_on_error=1" in options and "ignore_noninstrumented_modules=1" in options
    assert f"suppressions={sanitizer.SUPPRESSIONS}" in options
    assert sanitizer.SUPPRESSIONS.is_file()  # shipped as package data
