"""`--config-keys` reads the same in every command: several keys after one flag (InferenceX's `nargs='+'`), or the
flag repeated; a recipe file or folder after the keys is the command's argument, never swallowed as a key."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.cli.options import config_keys_option

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml"
KEY = "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident"


@click.command()
@click.argument("files", nargs=-1)
@config_keys_option()
def _cmd(files: tuple[str, ...], config_keys: tuple[str, ...]) -> None:
    click.echo(f"{list(config_keys)} {list(files)}")


@pytest.mark.parametrize(("argv", "keys", "files"), [
    (["--config-keys", "a", "b", "r.yaml"], ["a", "b"], ["r.yaml"]),
    (["r.yml", "--config-keys", "a", "b"], ["a", "b"], ["r.yml"]),
    (["--config-keys", "a", "--config-keys", "b*", "dir/r"], ["a", "b*"], ["dir/r"]),
    (["--config-keys", "qwen3.5-*", "recipes"], ["qwen3.5-*"], ["recipes"]),  # an existing folder
    (["--config-keys", "a", "--", "b"], ["a"], ["b"]),
])
def test_keys_stop_at_a_recipe_file_or_folder(argv: list[str], keys: list[str], files: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    res = CliRunner().invoke(_cmd, argv)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"{keys} {files}"


def test_a_folder_named_like_a_key_is_a_key_unless_it_holds_recipes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run folder is often named after its key (`--out KEY`): it holds no recipe, so it does not end the keys (the
    key was dropped and its recipe never checked); a folder of recipes does."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "key-b" / "servers" / "g").mkdir(parents=True)  # a TensorRT-LLM run's launch files are YAML
    (tmp_path / "key-b" / "servers" / "g" / "extra_llm_api_options.yaml").write_text("")
    (tmp_path / "key-b" / "run.json").write_text("{}")
    (tmp_path / "recipes" / "more").mkdir(parents=True)
    (tmp_path / "recipes" / "more" / "r.yaml").write_text("")
    res = CliRunner().invoke(_cmd, ["--config-keys", "a", "key-b", "recipes"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "['a', 'key-b'] ['recipes']"


def test_validate_takes_its_recipe_after_the_keys() -> None:
    """It took the recipe for a second key and then said a FILES argument was missing."""
    res = CliRunner().invoke(cli, ["validate", "--config-keys", KEY, "nope", str(SEED)])
    assert res.exit_code == 2
    assert "Config key not found: nope" in res.output
    ok = CliRunner().invoke(cli, ["validate", "--config-keys", KEY, str(SEED)])
    assert ok.exit_code == 0, ok.output
