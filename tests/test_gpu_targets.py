"""The GPU targets' CPU-side logic, run where CI runs (no GPU): what a user without the GPU
packages, loader or driver is told, libraries named by package in racefuzz.toml, per-target
tolerance, and loader variables in place before a worker starts. The GPU runs themselves are in
bench/results/gpu.md (through the `device` tool, an H200)."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import psutil
import pytest
from test_cli import racefuzz

from racefuzz.execute import executor
from racefuzz.execute.zygote_pool import ZygoteLauncher, available
from racefuzz.schedule.model import Op, Schedule, Step
from racefuzz.targets.registry import load_target

HAVE = {
    m: importlib.util.find_spec(m) is not None for m in ("onnxruntime_ep_webgpu", "nxrt_ep_cuda")
}


@pytest.mark.parametrize(
    ("target", "module", "line"),
    [
        (
            "webgpu",
            "onnxruntime_ep_webgpu",
            "racefuzz: error: target 'webgpu' needs the package onnxruntime-ep-webgpu "
            "(pip install onnxruntime-ep-webgpu)",
        ),
        (
            "nxrt-cuda",
            "nxrt_ep_cuda",
            "racefuzz: error: target 'nxrt-cuda' needs the package nxrt-ep-cuda "
            "(pip install --pre nxrt-ep-cuda)",
        ),
    ],
)
def test_a_gpu_target_without_its_package_is_one_line_and_exit_2(
    target: str, module: str, line: str, tmp_path: Path
) -> None:
    if HAVE[module]:
        pytest.skip(f"{module} is installed here")
    done = racefuzz("run", "--target", target, "--seconds", "5", "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("target", ["cuda", "tensorrt"])
def test_ort_gpu_targets_on_the_cpu_wheel_are_one_line_and_exit_2(
    target: str, tmp_path: Path
) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("onnxruntime-gpu is installed here")
    done = racefuzz("doctor", "--target", target)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"racefuzz: error: target '{target}' needs onnxruntime-gpu in place of")
    assert "pip uninstall -y onnxruntime" in line


def test_a_library_named_by_package_resolves_through_get_library_path(tmp_path: Path) -> None:
    import nxrt_ep_cpu

    (tmp_path / "racefuzz.toml").write_text(
        textwrap.dedent(
            """
            [targets.n]
            models = ["tiny"]
            tolerance = { rtol = 0.001, atol = 0.002 }
            [targets.n.libraries]
            nxrt = { package = "nxrt_ep_cpu" }
            [targets.n.profiles.p]
            library = "nxrt"
            ep = "cpu_ep"
            """
        )
    )
    target = load_target("n", tmp_path / "racefuzz.toml")
    assert target.libraries[0].path == Path(nxrt_ep_cpu.get_library_path())
    assert target.tolerance == (0.001, 0.002)


@pytest.mark.parametrize(
    ("library", "message"),
    [
        ('{ package = "no_such_ep_pkg" }', "needs the package no_such_ep_pkg"),
        ('{ package = "json" }', "json.get_library_path()"),
        ('{ package = "nxrt_ep_cpu", path = "x.so" }', "give either 'path' or 'package'"),
    ],
)
def test_a_bad_package_library_is_one_line(tmp_path: Path, library: str, message: str) -> None:
    (tmp_path / "racefuzz.toml").write_text(
        f"[targets.n]\n[targets.n.libraries]\nnxrt = {library}\n"
        '[targets.n.profiles.p]\nlibrary = "nxrt"\nep = "cpu_ep"\n'
    )
    done = racefuzz("doctor", "--target", "n", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("racefuzz: error: racefuzz.toml: targets.n.libraries.nxrt: ")
    assert message in line


def test_the_zygote_is_born_with_the_target_env(testbed_library: Path) -> None:
    # A loader variable (LD_LIBRARY_PATH for nxrt-cuda's CUDA wheels, Vulkan driver files)
    # set only in the forked child would come too late for the dynamic loader: the zygote
    # itself must start with the target's environment.
    if not available():
        pytest.skip("no fork on this platform")
    target = load_target("testbed").with_env(RACEFUZZ_TEST_LOADER_VAR="from-the-start")
    launcher = ZygoteLauncher()
    try:
        run = executor.run(target, Schedule(1, (Step(0, Op.REGISTER),)), launcher=launcher)
        zygotes = [
            p
            for p in psutil.Process().children()
            if "racefuzz.worker.zygote" in " ".join(p.cmdline())
        ]
        assert zygotes and all(
            z.environ().get("RACEFUZZ_TEST_LOADER_VAR") == "from-the-start" for z in zygotes
        )
    finally:
        launcher.close()
    assert not run.findings, run


def test_a_missing_loader_or_driver_is_one_line_naming_it() -> None:
    from racefuzz.errors import RacefuzzError
    from racefuzz.targets.gpu import require_shared_library

    with pytest.raises(RacefuzzError) as raised:
        require_shared_library("libracefuzz-no-such.so.9", "the Vulkan loader", "target 'webgpu'")
    assert str(raised.value) == (
        "target 'webgpu' needs the Vulkan loader (libracefuzz-no-such.so.9 not found)"
    )
    require_shared_library("libc.so.6", "the C library", "target 'x'")  # present: no error
