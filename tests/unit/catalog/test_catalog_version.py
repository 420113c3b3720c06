"""Version ordering as engine tags spell it: what a 'needs >= 0.5.16' gate compares."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from llmsweep.catalog.version import Version
from llmsweep.errors import ConfigError


def test_release_pre_post_dev_ordering() -> None:
    ordered = ["0.5.12.dev1", "0.5.12rc1", "0.5.12", "0.5.12.post1", "0.5.12.post2", "0.5.16rc1", "0.5.16", "1.2.0rc6",
               "1.2.0"]
    parsed = [Version.parse(t) for t in ordered]
    assert parsed == sorted(reversed(parsed))
    assert Version.parse("v0.5.16") == Version.parse("0.5.16.0")
    assert Version.parse("0.5.9") < Version.parse("0.5.16")  # numeric, not lexical


def test_tag_spellings() -> None:
    assert str(Version.parse("v0.5.12.post1")) == "0.5.12.post1"
    assert str(Version.parse("0.1.2.post")) == "0.1.2.post0"
    assert str(Version.parse("1.1.0rc2.post2")) == "1.1.0rc2.post2"
    assert Version.parse("0.5.12.post1").base == Version.parse("0.5.12")


def test_not_a_version() -> None:
    assert Version.try_parse("nightly") is None
    with pytest.raises(ConfigError, match="not a version"):
        Version.parse("nightly-09663ab")


def test_pydantic_field_round_trip() -> None:
    class M(BaseModel):
        v: Version

    m = M.model_validate({"v": "0.5.16"})
    assert m.v == Version.parse("0.5.16")
    assert m.model_dump(mode="json") == {"v": "0.5.16"}
    with pytest.raises(ValueError):
        M.model_validate({"v": "latest"})
