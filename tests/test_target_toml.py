"""A config-defined target written as TOML reads back to the same target (what bundles carry)."""

from __future__ import annotations

from pathlib import Path

from racefuzz.targets.model import Library, Profile, Target
from racefuzz.targets.registry import load_target
from racefuzz.targets.toml_io import target_toml


def test_every_field_survives_the_round_trip(tmp_path: Path) -> None:
    library = tmp_path / "libep.so"
    library.write_bytes(b"")
    gpu = Profile(
        "dml-gpu",
        "ep",
        "AmdGpuExecutionProvider",
        {"backend": "dml", "device_id": "0"},
        device_type="gpu",
        vendor_id=0x1002,
        intra_op_threads=1,
        session_config={"session.disable_cpu_ep_fallback": "1"},
    )
    cpu = Profile("cpu", None, "CPUExecutionProvider", {})
    target = Target(
        "my-ep",
        (Library("ep", library),),
        (gpu, cpu),
        ("tiny", "mlp"),
        env={"EP_LOG": "0"},
        aliases={"dml": "dml-gpu", "mgx": "cpu"},
        description='an EP "under test"',
        tolerance=(1e-3, 5e-4),
        cluster_by="overlap",
    )
    config = tmp_path / "bundle" / "racefuzz.toml"
    config.parent.mkdir()
    config.write_text(target_toml(target))
    again = load_target("my-ep", config)
    assert again == target and again.description == target.description


def test_a_layered_target_reads_back_layered(tmp_path: Path, testbed_library: Path) -> None:
    from racefuzz.targets import layer

    plain = Target(
        "my-ep",
        (Library("ep", testbed_library),),
        (Profile("p", "ep", "RacefuzzTestbed", {"profile": "dml"}),),
        ("tiny",),
        backend_option="profile",
    )
    layered = layer.wrap(plain, "profile", name="my-ep")
    assert layered.layer and layered.libraries[0].path != testbed_library
    config = tmp_path / "racefuzz.toml"
    text = target_toml(layered)
    assert "layer = true" in text and str(testbed_library) in text
    config.write_text(text)
    assert load_target("my-ep", config) == layered
    # `[layer]` on a target layered already is that target, never a layer in front of a layer.
    assert load_target("my-ep[layer]", config) == layered
