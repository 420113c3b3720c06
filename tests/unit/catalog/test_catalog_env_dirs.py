"""A folder an environment variable names for the catalog that is not one is refused naming the variable:
`$LLMSWEEP_CATALOG_DIR` pointing at a missing folder or a file had been skipped without a word (a typo read no user
catalog at all), and a missing `$LLMSWEEP_GOLDEN_AL_DIR` was said as "Invalid value for --curves" when --curves was
not given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.catalog.golden import CURVES_ENV_VAR, user_curve_dirs
from llmsweep.catalog.sources import ENV_VAR, catalog_dirs, clear_caches
from llmsweep.errors import ConfigError


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_caches()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_catalog_dir_that_is_not_a_folder_is_refused(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    named = tmp_path / "catalog"
    if kind == "file":
        named.write_text("")
    monkeypatch.setenv(ENV_VAR, f"{tmp_path}{os.pathsep}{named}")
    said = "which is a file, not a catalog folder" if kind == "file" else "which does not exist"
    with pytest.raises(ConfigError, match=rf"\${ENV_VAR} names {named}, {said}"):
        catalog_dirs()
    code, _, err = run_main(capsys, "catalog", "models")
    assert code == 2 and f"${ENV_VAR} names {named}" in err and "Traceback" not in err, err[-2000:]


def test_sim_calibrate_save_may_make_the_catalog_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where `--save` writes, a folder the variable names is made (the first calibration a user saves)."""
    from llmsweep.sim.calibration import user_file

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "new"))
    assert user_file().parent == tmp_path / "new"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_golden_al_dir_that_is_not_a_folder_is_said_as_the_variable(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    named = tmp_path / "curves"
    if kind == "file":
        named.write_text("")
    monkeypatch.setenv(CURVES_ENV_VAR, str(named))
    with pytest.raises(ConfigError, match=rf"\${CURVES_ENV_VAR} names {named}"):
        user_curve_dirs()
    code, _, err = run_main(capsys, "al", "lookup", "qwen3.5", "-m", "mtp", "-k", "3")
    assert code == 2 and f"${CURVES_ENV_VAR} names {named}" in err, err[-2000:]
    assert "--curves" not in err.split("fix:")[0]


def test_a_curves_option_that_is_not_a_folder_is_said_as_the_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(CURVES_ENV_VAR, raising=False)
    code, _, err = run_main(capsys, "al", "lookup", "qwen3.5", "-m", "mtp", "-k", "3", "--curves", tmp_path / "no")
    assert code == 2 and "Invalid value for '--curves'" in err and "does not exist" in err, err[-2000:]
