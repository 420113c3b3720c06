"""The simulator's refusal of a model or GPU it has no figures for names what gives it them, and following it works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from llmsweep.errors import ConfigError
from llmsweep.sim.inputs import perf_inputs

# Values for every field a fix may name (a SmolLM2-135M-like model, an H200-like GPU): the test writes only the
# fields the fix names, so an entry the fix under-describes fails to load.
MODEL_VALUES = {"name": "Acme-Tiny", "family": "acme", "prefix": "acmetiny", "total_params_b": 0.135,
                "active_params_b": 0.135, "layers": 30, "hidden_size": 576,
                "attention": {"kind": "gqa", "heads": 9, "kv_heads": 3, "head_dim": 64}, "native_context": 8192,
                "source": "test"}
HARDWARE_VALUES = {"name": "Acme Z9000", "vendor": "nvidia", "arch": "sm90", "generation": "hopper",
                   "platform": "cuda", "hbm_gb": 150.76, "hbm_tbps": 4.8, "bf16_tflops": 989, "fp8_tflops": 1979,
                   "fp4_tflops": None, "scaleup": "nvlink4", "scaleup_gbps": 900, "gpus_per_node": 8,
                   "source": "test"}


def _fix(model: str, hardware: str) -> str:
    with pytest.raises(ConfigError) as err:
        perf_inputs(model, hardware)
    assert err.value.fix is not None
    return err.value.fix


def _follow(fix: str, catalog: Path, key: str, extra: dict[str, object], values: dict[str, object]) -> None:
    """Write the entry the fix names: its file under the catalog directory, the fields it lists."""
    found = re.search(r"add an entry to (\w+\.yaml) in \$LLMSWEEP_CATALOG_DIR \(else [^)]*\), [^,]*, "
                      r"with (.*?) \(the packaged ", fix)
    assert found, fix
    file, fields = found.group(1), found.group(2).split(", ")
    section = file.removesuffix(".yaml")
    entry = {**extra, **{f: values[f] for f in fields}}
    (catalog / file).write_text(yaml.safe_dump({section: {key: entry}}))


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A catalog directory the entry is written to, named by $LLMSWEEP_CATALOG_DIR once the fix is read (as a user
    sets it for the next command); none before."""
    monkeypatch.delenv("LLMSWEEP_CATALOG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no ~/.config/llmsweep/catalog either
    return tmp_path / "catalog"


def _use(catalog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog.mkdir()
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(catalog))


def test_an_unknown_models_fix_is_a_catalog_entry_that_makes_it_simulated(catalog: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fix = _fix("acme/Acme-Tiny-Instruct", "h200")
    assert "--params-b" not in fix  # no such option: `sim serve` refused it
    _use(catalog, monkeypatch)
    _follow(fix, catalog, "acme-tiny", {"hf_ids": ["acme/Acme-Tiny-Instruct"]}, MODEL_VALUES)
    inputs = perf_inputs("acme/Acme-Tiny-Instruct", "h200")
    assert inputs.n_layers == 30 and inputs.hidden == 576
    assert inputs.kv_bytes_per_token == 30 * 2 * 3 * 64 * 2


def test_an_unknown_gpus_fix_is_a_catalog_entry_that_makes_it_simulated(catalog: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fix = _fix("llama-1b", "z9000")
    assert "--hbm-gb" not in fix
    _use(catalog, monkeypatch)
    _follow(fix, catalog, "z9000", {}, HARDWARE_VALUES)
    inputs = perf_inputs("llama-1b", "z9000")
    assert inputs.hbm_bytes == pytest.approx(perf_inputs("llama-1b", "h200").hbm_bytes)
