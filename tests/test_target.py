"""Targets: built-ins, aliases, JSON round trips, and config files good and bad."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import onnxruntime as ort
import pytest

from racefuzz.errors import RacefuzzError
from racefuzz.schedule.model import Op, Schedule, Step, problems
from racefuzz.targets import builtin as builtin_targets
from racefuzz.targets.model import BUILTIN_TARGETS, Target, describe
from racefuzz.targets.models import DEFAULT_MODELS
from racefuzz.targets.registry import load_target

EXAMPLE = Path(__file__).parent.parent / "examples" / "racefuzz.toml"
FAKE_LIB = Path("/nonexistent/testbed.dll")  # the testbed is never built or loaded here


def seed_schedule(*, library: str | None = None) -> Schedule:
    """Two sessions on the seed's profile names, as the named scenarios write them."""
    return Schedule(
        threads=2,
        steps=(
            Step(0, Op.REGISTER, library=library),
            Step(0, Op.CREATE, session="a", profile="dml", model="mlp"),
            Step(1, Op.CREATE, session="b", profile="mgx", model="tiny"),
            Step(1, Op.RUN, session="a"),
        ),
    )


def roundtrip(target: Target) -> Target:
    return Target.from_json(json.loads(json.dumps(target.to_json())))


# --- built-ins --------------------------------------------------------------------------------


def test_the_builtin_names_each_load_or_say_why() -> None:
    assert BUILTIN_TARGETS[:5] == ("testbed", "nxrt-cpu", "cpu", "webgpu", "nxrt-cuda")
    assert BUILTIN_TARGETS[5:] == ("cuda", "tensorrt", "webgpu-cpu", "openvino", "ggml")
    assert load_target("cpu").name == "cpu"
    assert load_target("nxrt-cpu").name == "nxrt-cpu"


def test_the_cpu_target_maps_the_seed_profiles_onto_its_two_thread_settings() -> None:
    target = load_target("cpu")
    assert target.libraries == ()
    assert target.profile("dml").name == "cpu"
    assert target.profile("mgx").intra_op_threads == 1
    assert target.library_of("mgx") is None
    assert target.models == DEFAULT_MODELS
    assert target.applies(seed_schedule())
    assert problems(seed_schedule(), target.library_of) == []


def test_the_nxrt_target_resolves_to_the_installed_library_file() -> None:
    target = load_target("nxrt-cpu")
    (lib,) = target.libraries
    assert lib.name == "nxrt" and lib.path.is_file()
    assert [p.name for p in target.profiles] == ["nxrt", "nxrt-b"]
    assert target.profile("dml").name == "nxrt" and target.profile("mgx").name == "nxrt-b"
    assert {target.library_of(p) for p in ("dml", "mgx", "nxrt-b")} == {"nxrt"}
    assert {p.ep_name for p in target.profiles} == {"cpu_ep"}


def test_the_nxrt_target_without_its_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nxrt_ep_cpu", None)  # makes the import fail
    expected = "target 'nxrt-cpu' needs the package nxrt-ep-cpu (pip install nxrt-ep-cpu)"
    with pytest.raises(RacefuzzError, match=f"^{re.escape(expected)}$"):
        load_target("nxrt-cpu")


def test_testbed_bug_switches_are_canonical_and_reach_the_environment() -> None:
    assert builtin_targets.parse_bugs("testbed:b4, B3,B4") == ("B3", "B4")
    target = builtin_targets.testbed_target(("B4", "b3"), library_path=FAKE_LIB)
    assert target.name == "testbed:B3,B4"
    assert target.env == {"RACEFUZZ_TESTBED_BUGS": "B3,B4"}
    assert target.trace


def test_a_plain_testbed_sets_an_empty_bug_list_and_has_the_seed_profiles() -> None:
    target = builtin_targets.testbed_target(library_path=FAKE_LIB)
    assert target.name == "testbed" and target.env == {"RACEFUZZ_TESTBED_BUGS": ""}
    assert target.libraries[0].path == FAKE_LIB
    for name in ("dml", "mgx"):
        p = target.profile(name)
        assert (p.library, p.ep_name, p.provider_options) == (
            "testbed",
            "RacefuzzTestbed",
            {"profile": name},
        )
        assert (p.device_type, p.vendor_id) == ("gpu", 0x1002)
    assert target.models == ("tiny", "mlp", "wide", "tail")
    assert target.applies(seed_schedule(library="testbed"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "testbed:B25",
            "unknown testbed bug 'B25' in 'testbed:B25' "
            "(known: B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17, "
            "B18, B19, B20, B21, B22, B23, B24)",
        ),
        (
            "testbed:",
            "unknown testbed bug '' in 'testbed:' "
            "(known: B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17, "
            "B18, B19, B20, B21, B22, B23, B24)",
        ),
        ("cpu:B1", "target 'cpu' takes no ':' arguments (got 'cpu:B1')"),
    ],
)
def test_bad_builtin_specs_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(RacefuzzError, match=f"^{re.escape(message)}$"):
        load_target(spec)


# --- the Target type --------------------------------------------------------------------------


def test_an_unknown_profile_lists_profiles_and_aliases() -> None:
    expected = "unknown profile 'hip' for target 'cpu' (known: cpu, cpu-1t, dml, mgx)"
    with pytest.raises(RacefuzzError, match=f"^{re.escape(expected)}$"):
        load_target("cpu").profile("hip")


def test_an_unknown_library_is_an_error() -> None:
    target = load_target("nxrt-cpu")
    assert target.library("nxrt") is target.libraries[0]
    with pytest.raises(RacefuzzError, match=r"^unknown library 'x' for target 'nxrt-cpu' \("):
        target.library("x")


def test_a_schedule_naming_unknown_profiles_or_libraries_does_not_apply() -> None:
    target = builtin_targets.testbed_target(library_path=FAKE_LIB)
    hip = Schedule(
        1, (Step(0, Op.REGISTER), Step(0, Op.CREATE, session="s", profile="hip", model="mlp"))
    )
    assert target.missing(hip) == ["profile 'hip'"]
    assert not target.applies(hip)
    assert target.missing(seed_schedule(library="nxrt")) == ["library 'nxrt'"]


def test_targets_round_trip_through_json_and_stay_hashable() -> None:
    targets = [
        load_target("cpu"),
        load_target("nxrt-cpu"),
        builtin_targets.testbed_target(("B1",), library_path=FAKE_LIB),
    ]
    for target in targets:
        back = roundtrip(target)
        assert back == target and hash(back) == hash(target)
        assert back.description == target.description
    assert len({*targets, *map(roundtrip, targets)}) == 3


def test_with_env_adds_variables_without_touching_the_original() -> None:
    base = builtin_targets.testbed_target(("B2",), library_path=FAKE_LIB)
    more = base.with_env({"A": "1"}, B="2")
    assert more.env == {"RACEFUZZ_TESTBED_BUGS": "B2", "A": "1", "B": "2"}
    assert base.env == {"RACEFUZZ_TESTBED_BUGS": "B2"}


def test_a_profile_matches_ep_devices_by_name_type_and_vendor() -> None:
    cpu = load_target("cpu").profile("cpu")
    assert [d.ep_name for d in ort.get_ep_devices() if cpu.matches(d)] == ["CPUExecutionProvider"]
    gpu = builtin_targets.testbed_target(library_path=FAKE_LIB).profile("dml")

    def device(kind: str, vendor: int) -> SimpleNamespace:
        hw = SimpleNamespace(type=SimpleNamespace(name=kind), vendor_id=vendor)
        return SimpleNamespace(ep_name="RacefuzzTestbed", device=hw)

    assert gpu.matches(device("GPU", 0x1002))
    assert not gpu.matches(device("CPU", 0x1002))
    assert not gpu.matches(device("GPU", 0x10DE))


def test_describe_names_libraries_profiles_aliases_and_models() -> None:
    text = describe(builtin_targets.testbed_target(("B3",), library_path=FAKE_LIB))
    assert text.splitlines()[0].startswith("target testbed:B3: racefuzz's testbed EP")
    assert f"  library testbed: {FAKE_LIB}" in text
    assert (
        "  profile mgx: RacefuzzTestbed from testbed on gpu of vendor 0x1002 "
        "[profile=mgx, session.intra_op.allow_spinning=0]" in text
    )
    assert "  models: tiny, mlp, wide" in text
    assert "  env: RACEFUZZ_TESTBED_BUGS=B3" in text
    assert "  aliases: dml -> cpu, mgx -> cpu-1t" in describe(load_target("cpu"))


# --- config files -----------------------------------------------------------------------------

GOOD = """
[targets.amdgpu]
description = "two backends"
models = ["mlp", "models/m.onnx"]
env = { LOG = 0 }
[targets.amdgpu.libraries]
amdgpu = "ep/amdgpu_ep.dll"
[targets.amdgpu.profiles.d]
library = "amdgpu"
ep = "AmdGpu"
device = "gpu"
vendor_id = 0x1002
options = { backend = "dml", device_id = 0 }
[targets.amdgpu.profiles.m]
library = "amdgpu"
ep = "AmdGpu"
intra_op_threads = 2
session_config = { "session.x" = "1" }
[targets.amdgpu.aliases]
dml = "d"
mgx = "m"
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder holding an EP library file and a model for configs to point at."""
    (tmp_path / "ep").mkdir()
    (tmp_path / "ep" / "amdgpu_ep.dll").write_bytes(b"not really a library")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.onnx").write_bytes(b"not really a model")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_config_target_resolves_paths_against_the_config_folder(folder: Path) -> None:
    (folder / "racefuzz.toml").write_text(GOOD)
    target = load_target("amdgpu")  # ./racefuzz.toml by default
    assert target.description == "two backends"
    assert target.libraries[0].path == folder.resolve() / "ep" / "amdgpu_ep.dll"
    assert target.models == ("mlp", str(folder.resolve() / "models" / "m.onnx"))
    assert target.env == {"LOG": "0"}
    d, m = target.profile("dml"), target.profile("mgx")
    assert (d.name, d.library, d.ep_name, d.device_type, d.vendor_id) == (
        "d",
        "amdgpu",
        "AmdGpu",
        "gpu",
        0x1002,
    )
    assert d.provider_options == {"backend": "dml", "device_id": "0"}
    assert (m.intra_op_threads, m.session_config, m.device_type) == (2, {"session.x": "1"}, None)
    assert target.applies(seed_schedule(library="amdgpu"))
    assert roundtrip(target) == target


def test_a_config_elsewhere_is_read_relative_to_its_own_folder(folder: Path) -> None:
    sub = folder / "conf"
    sub.mkdir()
    shutil.move(folder / "ep", sub / "ep")
    shutil.move(folder / "models", sub / "models")
    (sub / "targets.toml").write_text(GOOD)
    target = load_target("amdgpu", Path("conf/targets.toml"))
    assert target.libraries[0].path == sub.resolve() / "ep" / "amdgpu_ep.dll"


def test_the_example_config_loads_when_its_files_exist(folder: Path) -> None:
    shutil.copy(EXAMPLE, folder / "racefuzz.toml")
    (folder / "models" / "small_resnet.onnx").write_bytes(b"")
    amdgpu = load_target("amdgpu")
    assert amdgpu.profile("dml").provider_options == {"backend": "dml", "device_id": "0"}
    cpu = load_target("cpu-threads")
    assert [p.intra_op_threads for p in cpu.profiles] == [1, 2]
    assert cpu.applies(seed_schedule())


def _profile(body: str) -> str:
    head = '[targets.t]\nmodels = ["mlp"]\n[targets.t.libraries]\nlib = "ep/amdgpu_ep.dll"\n'
    return head + "[targets.t.profiles.p]\n" + body


BAD = [
    (
        _profile('library = "x"\nep = "E"'),
        "racefuzz.toml: targets.t.profiles.p: 'library' names unknown library 'x'",
    ),
    (
        '[targets.t.libraries]\nlib = "nope.so"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t.libraries.lib: cannot load EP library '{folder}/nope.so': "
        "no such file",
    ),
    (
        '[targets.t.libraries]\nlib = "ep"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t.libraries.lib: cannot load EP library '{folder}/ep': not a file",
    ),
    (
        _profile('library = "lib"'),
        "racefuzz.toml: targets.t.profiles.p: needs 'ep' (the EP name that "
        "onnxruntime.get_ep_devices() lists)",
    ),
    (
        _profile('ep = "E"\ndevice = "tpu"'),
        "racefuzz.toml: targets.t.profiles.p: 'device' must be one of cpu, gpu, npu, not 'tpu'",
    ),
    (
        _profile('ep = "E"\nvendor_id = "amd"'),
        "racefuzz.toml: targets.t.profiles.p: 'vendor_id' must be an integer such as 0x1002",
    ),
    (
        _profile('ep = "E"\nintra_op_threads = 0'),
        "racefuzz.toml: targets.t.profiles.p: 'intra_op_threads' must be a positive integer",
    ),
    (
        _profile('ep = "E"\noptions = { a = [1] }'),
        "racefuzz.toml: targets.t.profiles.p.options: 'a' must be a string or a number",
    ),
    (
        _profile('ep = "E"\nbackend = "dml"'),
        "racefuzz.toml: targets.t.profiles.p: unknown key 'backend' (known: library, ep, "
        "device, vendor_id, options, intra_op_threads, session_config, device_index, "
        "thread_pools, execution_mode, inter_op_threads)",
    ),
    (
        '[targets.t]\nlibrary = "x"',
        "racefuzz.toml: targets.t: unknown key 'library' (known: description, models, env, "
        "trace, tolerance, cluster_by, libraries, profiles, aliases, layer, backend_option)",
    ),
    (
        '[targets.t]\ncluster_by = "stack"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t: 'cluster_by' must be one of symptom, overlap",
    ),
    (
        '[targets.t]\ndescription = "no profiles"',
        "racefuzz.toml: targets.t: needs at least one profile ([targets.t.profiles.NAME])",
    ),
    (
        _profile('ep = "E"\n[targets.t.aliases]\ndml = "q"'),
        "racefuzz.toml: targets.t.aliases: 'dml' names unknown profile 'q'",
    ),
    (
        _profile('ep = "E"\n[targets.t.aliases]\np = "p"'),
        "racefuzz.toml: targets.t.aliases: 'p' is already a profile",
    ),
    (
        '[targets.t]\nmodels = ["m.onnx"]\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t.models: model 'm.onnx' not found",
    ),
    (
        '[targets.t]\nmodels = []\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t: 'models' must list at least one model",
    ),
    (
        '[targets.t]\nmodels = "mlp"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t: 'models' must be a list of model names or .onnx paths",
    ),
    (
        '[targets.t]\ntrace = "yes"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.t: 'trace' must be true or false",
    ),
    ("[targets]\nt = 3", "racefuzz.toml: targets.t: must be a table"),
    ("targets = 3", "racefuzz.toml: targets: must be a table"),
    (
        '[targets.cpu.profiles.p]\nep = "E"\n[targets.t.profiles.p]\nep = "E"',
        "racefuzz.toml: targets.cpu: 'cpu' is a built-in target; pick another name",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m.split(": ")[-1][:40] for _, m in BAD])
def test_a_bad_config_is_one_line_naming_the_file_and_key(
    folder: Path, text: str, message: str
) -> None:
    (folder / "racefuzz.toml").write_text(text)
    expected = message.format(folder=folder.resolve())
    with pytest.raises(RacefuzzError, match=f"^{re.escape(expected)}$"):
        load_target("t", Path("racefuzz.toml"))


def test_invalid_toml_is_one_line_with_tomllib_s_reason_and_position(folder: Path) -> None:
    (folder / "racefuzz.toml").write_text('[targets.t]\nmodels = ["mlp"\n')
    # The reason's wording is tomllib's and varies across Python versions; ours is pinned.
    with pytest.raises(RacefuzzError, match=r"^racefuzz\.toml: not valid TOML: [^\n]+\(at .+\)$"):
        load_target("t", Path("racefuzz.toml"))


def test_an_unknown_target_lists_builtins_and_config_targets(folder: Path) -> None:
    (folder / "racefuzz.toml").write_text(GOOD)
    expected = (
        "unknown target 'nope' (built-in: testbed[asan|tsan][:B1,..,B24], nxrt-cpu, cpu, webgpu, "
        "nxrt-cuda, cuda, tensorrt, webgpu-cpu, openvino, ggml; "
        "racefuzz.toml defines: amdgpu)"
    )
    with pytest.raises(RacefuzzError, match=f"^{re.escape(expected)}$"):
        load_target("nope")


def test_an_unknown_target_without_a_config_says_there_is_none(folder: Path) -> None:
    expected = (
        "unknown target 'nope' (built-in: testbed[asan|tsan][:B1,..,B24], nxrt-cpu, cpu, webgpu, "
        "nxrt-cuda, cuda, tensorrt, webgpu-cpu, openvino, ggml; "
        "no racefuzz.toml in the current folder)"
    )
    with pytest.raises(RacefuzzError, match=f"^{re.escape(expected)}$"):
        load_target("nope")


def test_a_missing_explicit_config_is_an_error(folder: Path) -> None:
    with pytest.raises(RacefuzzError, match=r"^cannot read config 'x\.toml': no such file$"):
        load_target("amdgpu", Path("x.toml"))
