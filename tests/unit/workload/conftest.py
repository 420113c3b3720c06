"""Fixtures of the workload tests: the small BPE tokenizer committed under tests/data/tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="session")
def bpe_tokenizer_dir() -> Path:
    pytest.importorskip("tokenizers")
    return DATA / "tokenizer"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    return DATA / "traces"
