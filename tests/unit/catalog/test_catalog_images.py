"""Image references: every tag InferenceX uses parses; the tag tells engine, version, platform and Python."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from llmsweep.catalog.images import parse_image
from llmsweep.catalog.version import Version
from llmsweep.errors import ConfigError


def test_seed_image() -> None:
    img = parse_image("lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730")
    assert (img.registry, img.repository) == ("docker.io", "lmsysorg/sglang-rocm")
    assert img.tag == "v0.5.16-rocm720-mi30x-20260730"
    assert img.engine == "sglang" and img.version == Version.parse("0.5.16")
    assert img.platform == "rocm" and img.rocm_version == "7.2.0" and img.gpu_family == "mi30x"
    assert img.build_date == dt.date(2026, 7, 30)
    assert img.python_version == "3.11.15" and not img.python_estimate and img.python_at_least("3.11") is True
    assert img.channel == "release" and img.warnings == []


def test_the_image_that_broke_the_seed_ships_python_3_10() -> None:
    img = parse_image("lmsysorg/sglang:v0.5.16-rocm720-mi30x")
    assert img.engine == "sglang" and img.version == Version.parse("0.5.16")
    assert img.python_version == "3.10.12" and img.python_path == "/opt/venv"
    assert img.python_at_least("3.11") is False
    older = parse_image("lmsysorg/sglang:v0.5.12-rocm720-mi30x")
    assert older.version == Version.parse("0.5.12") and older.python_estimate  # inferred, not observed


@pytest.mark.parametrize(
    ("ref", "engine", "version", "platform"),
    [
        ("vllm/vllm-openai:v0.11.0", "vllm", "0.11.0", "cuda"),
        ("vllm/vllm-openai-rocm:v0.27.1", "vllm", "0.27.1", "rocm"),
        ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715", "vllm", "0.9.1", "rocm"),
        ("rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006", "vllm", "0.10.2", "rocm"),
        ("rocm/vllm:v0.10.1_20250909", "vllm", "0.10.1", "rocm"),
        ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "trtllm", "1.2.0rc6", "cuda"),
        ("rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3", "atom", "0.1.3", "rocm"),
        ("rocm/atom:rocm7.2.2_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.2.post", "atom", "0.1.2.post0", "rocm"),
        ("rocm/atom:v0.1.3-rocm7.2.4", "atom", "0.1.3", "rocm"),  # a release tag led by its version
        ("rocm/atom:0.1.4_rocm7.2.4", "atom", "0.1.4", "rocm"),
        ("lmsysorg/sglang:v0.5.12.post1-cu130", "sglang", "0.5.12.post1", "cuda"),
        ("rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-2", "sglang", "0.5.9", "rocm"),
    ],
)
def test_engine_version_and_platform_from_the_tag(ref: str, engine: str, version: str, platform: str) -> None:
    img = parse_image(ref)
    assert img.engine == engine and img.version == Version.parse(version) and img.platform == platform


def test_cuda_and_rocm_versions_and_python_from_tag_tokens() -> None:
    assert parse_image("lmsysorg/sglang:v0.5.12.post1-cu130").cuda_version == "13.0"
    atom = parse_image("rocm/atom:rocm7.2.3_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom20260511")
    assert atom.rocm_version == "7.2.3" and atom.python_version == "3.12"
    assert atom.version is None and atom.build_date == dt.date(2026, 5, 11)  # a dated build, not a version


@pytest.mark.parametrize(
    "ref",
    [
        "vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa",
        "rocm/atom-dev:nightly_202606101403",
        "lmsysorg/sglang:dev",
    ],
)
def test_nightly_and_dev_tags_parse_with_unknown_version_and_a_warning(ref: str) -> None:
    img = parse_image(ref)
    assert img.engine is not None and img.version is None
    assert img.channel in {"nightly", "dev"}
    assert img.warnings and "version unknown" in img.warnings[0]


def test_nightly_commit_and_timestamp() -> None:
    assert parse_image("vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa").commit == (
        "09663abde0f50944a8d5ea30120666024b503faa"
    )
    assert parse_image("rocm/atom-dev:nightly_202606101403").build_date == dt.date(2026, 6, 10)


def test_pyxis_registry_hash_path_and_digests() -> None:
    img = parse_image("nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2")
    assert img.pyxis and img.registry == "nvcr.io" and img.repository == "nvidia/tensorrt-llm/release"
    assert img.version == Version.parse("1.1.0rc2.post2")
    assert img.reference() == "nvcr.io#nvidia/tensorrt-llm/release:1.1.0rc2.post2"
    assert img.reference(pyxis=False) == "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2"
    gh = parse_image("ghcr.io#org/img:tag")
    assert gh.registry == "ghcr.io" and gh.repository == "org/img" and gh.tag == "tag"
    digest = "sha256:" + "ab" * 32
    pinned = parse_image(f"localhost:5000/team/vllm:v0.26.0@{digest}")
    assert pinned.registry == "localhost:5000" and pinned.digest == digest and pinned.version == Version.parse("0.26.0")
    assert parse_image("ubuntu").repository == "library/ubuntu"


@pytest.mark.parametrize("ref", ["", "lmsysorg/sglang:", "has space:v1", "repo@sha256:xyz"])
def test_malformed_references_are_config_errors(ref: str) -> None:
    with pytest.raises(ConfigError):
        parse_image(ref)


def test_every_image_in_amd_master_parses(shared_dir: Path) -> None:
    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    images = {entry["image"] for entry in master.values()}
    assert len(images) > 20
    for ref in images:
        img = parse_image(ref)
        assert img.engine in {"sglang", "vllm", "atom"}, ref
        assert img.platform == "rocm", ref
        if img.channel == "release":
            assert img.version is not None, ref


def test_frameworks_of_amd_master_match_image_engines(shared_dir: Path) -> None:
    from llmsweep.catalog.engines import canonical_engine

    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    for key, entry in master.items():
        assert canonical_engine(entry["framework"]) == parse_image(entry["image"]).engine, key


def test_user_python_table_entry_is_used(user_catalog: Path) -> None:
    (user_catalog / "images.yaml").write_text(
        """\
python:
  my-vllm:
    repository: vllm/vllm-openai
    tag_pattern: '^v0\\.11\\.'
    python: 3.12.3
    evidence: docker run vllm/vllm-openai:v0.11.0 python3 --version
"""
    )
    assert parse_image("vllm/vllm-openai:v0.11.0").python_version == "3.12.3"
    assert parse_image("lmsysorg/sglang:v0.5.16-rocm720-mi30x").python_version == "3.10.12"


def test_image_fits_hardware_by_platform_and_gpu_family() -> None:
    from llmsweep.catalog.images import image_fits_hardware

    seed = parse_image("lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730")
    assert image_fits_hardware(seed, "mi300x")[0] is True
    assert image_fits_hardware(seed, "mi325x")[0] is True
    ok, why = image_fits_hardware(seed, "mi355x")
    assert ok is False and "mi35x" in why
    assert image_fits_hardware(parse_image("lmsysorg/sglang:v0.5.12.post1-cu130"), "mi300x")[0] is False
    assert image_fits_hardware(parse_image("vllm/vllm-openai-rocm:v0.27.1"), "mi355x")[0] is None  # tag does not say
    assert image_fits_hardware(parse_image("vllm/vllm-openai:v0.11.0"), "h200")[0] is True


def test_every_amd_master_entry_runs_an_image_built_for_its_runner(shared_dir: Path) -> None:
    from llmsweep.catalog.hardware import hardware_for_runner
    from llmsweep.catalog.images import image_fits_hardware

    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    for key, entry in master.items():
        hw = hardware_for_runner(entry["runner"])
        assert hw is not None, key
        assert image_fits_hardware(parse_image(entry["image"]), hw.id)[0] is not False, key


@pytest.mark.parametrize(("ref", "moving"), [
    ("lmsysorg/sglang:nightly", True), ("lmsysorg/sglang:dev", True), ("lmsysorg/sglang:dev-cu13", True),
    ("vllm/vllm-openai:latest", True), ("vllm/vllm-openai", True), ("myorg/engine:main", True),
    # a tag of words alone follows whatever its owner pushes last, branch word or not
    ("lmsysorg/sglang:blackwell", True), ("rocm/vllm:rocm", True), ("myorg/engine:devel", True),
    ("lmsysorg/sglang:stable", True), ("lmsysorg/sglang:latest-cu130", True),
    ("lmsysorg/sglang:blackwell-cu130", True), ("rocm/vllm:rocm7.2", True),
    ("lmsysorg/sglang:dev-x86_64-cu13-py3.12", True), ("vllm/vllm-openai:latest-arm64", True),
    ("vllm/vllm-openai:v0.11.0", False), ("lmsysorg/sglang:nightly-20260105", False),
    ("rocm/sgl-dev:20260701-mi35x", False), ("vllm/vllm-openai:nightly@sha256:" + "a" * 64, False),
    ("myorg/engine:build42", False), ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc5", False),
    ("vllm/vllm-openai-rocm:nightly-cb8104839c141609d99f1254459ef3a4f1bd4263", False),  # a nightly pinned by commit
])
def test_a_reference_that_follows_a_branch_is_moving(ref: str, moving: bool) -> None:
    """`run --reuse` never stands on a result of a tag that can name another build tomorrow (tests/e2e/
    test_docker_daemon.py runs it): no tag, or one that names no build (no version, build date, commit or other
    number once its platform words, CUDA/ROCm/Python/GPU/CPU, are set aside), with no digest to pin it."""
    assert parse_image(ref).moving is moving


def test_no_image_inferencex_pins_is_moving(shared_dir: Path) -> None:
    """Every image the InferenceX master config and the research specs name is pinned (a version, a build date, a
    commit): a rule that calls one moving would refuse to reuse InferenceX's own results."""
    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    refs = {entry["image"] for entry in master.values()}
    for spec in sorted((shared_dir / "research").glob("*.md")):
        refs |= set(re.findall(r"(?:lmsysorg|rocm|vllm)/[a-z0-9._-]+:[A-Za-z0-9._-]+", spec.read_text()))
    assert len(refs) >= 30, sorted(refs)
    assert [ref for ref in sorted(refs) if parse_image(ref).moving] == []


@pytest.mark.parametrize("ref", ["huggingface/transformers-pytorch-gpu:5.17.0",
                                 "huggingface/transformers-pytorch-cpu:5.17.0",
                                 "docker.io/huggingface/transformers-all-latest-gpu:5.17.0"])
def test_hugging_face_transformers_images_are_transformers_at_the_tags_version(ref: str) -> None:
    """The transformers engine's images (huggingface/transformers docker/) were recognised as no engine: a job's
    recorded version came only from `serve.engine.version`, and one that disagreed with the tag went unseen."""
    img = parse_image(ref)
    assert img.engine == "transformers" and img.version == Version.parse("5.17.0") and img.warnings == []
    latest = parse_image(ref.rsplit(":", 1)[0] + ":latest")
    assert latest.engine == "transformers" and latest.version is None and latest.channel == "nightly"
    assert parse_image("someone/transformers-fork:5.17.0").engine is None


def test_a_transformers_job_runs_at_its_images_version(tmp_path: Path) -> None:
    from llmsweep import engines
    from llmsweep.plan import jobs_from_files
    from llmsweep.policy import validate_files

    text = (Path(__file__).parents[3] / "examples" / "transformers" / "tiny-cpu-transformers.yaml").read_text()
    text = text.replace("    engine: { name: transformers, version: 5.17.0 }\n", "")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    assert {engines.render(job).engine_version for job in jobs_from_files([path])} == {"5.17.0"}
    path.write_text(text.replace("  serve:\n", "  serve:\n    engine: { name: transformers, version: 5.16.0 }\n"),
                    encoding="utf-8")
    found = [f for f in validate_files([path]).findings if f.rule.startswith("engine.")]
    assert [(f.rule, f.is_error) for f in found] == [("engine.version-mismatch", True)]
    assert "image huggingface/transformers-pytorch-cpu:5.17.0 is transformers 5.17.0" in found[0].message
