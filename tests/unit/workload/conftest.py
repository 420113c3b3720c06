"""Fixtures of the workload tests: the BPE tokenizer llmsweep ships, and the trace corpus under tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="session")
def bpe_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged 32000-entry byte-level BPE with its ChatML template, written once as an HF tokenizer directory."""
    pytest.importorskip("tokenizers")
    from llmsweep.modelsynth.tokenizer import packaged_tokenizer, write_tokenizer

    out = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(packaged_tokenizer(), out)
    return out


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    return DATA / "traces"
