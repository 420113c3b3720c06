"""A recipe value the launch writes as a word of the engine's command line never reads there as a flag.

`serve: {model-path: "--trust-remote-code"}` rendered `vllm serve --trust-remote-code …` (trtllm-serve likewise): the
value became an engine flag past every check on `serve.args`. argparse and click parse any word that begins with `-`
(a negative number aside) as a flag, so such a value is refused at load, at its line, wherever the launch writes it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmsweep import engines
from llmsweep.plan import full_sweep
from llmsweep.spec import loads_recipes

BASE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
DASHED = "--trust-remote-code"


def _recipe(**serve: Any) -> dict[str, Any]:
    (recipe,) = yaml.safe_load(BASE.read_text(encoding="utf-8")).values()
    recipe = copy.deepcopy(recipe)
    recipe["serve"] = {"engine": {"name": "vllm"}, **serve}
    return recipe


def _errors(recipe: dict[str, Any]) -> list[Any]:
    return loads_recipes(yaml.safe_dump({"k": recipe}, sort_keys=False), "r.yaml").errors


@pytest.mark.parametrize(("where", "path"), [
    ("model", "k.model"),
    ("model-path", "k.serve.model-path"),
    ("load-format", "k.serve.load-format"),
    ("draft-model", "k.serve.spec-decoding.draft-model"),
    ("served-model-name", "k.workload.served-model-name"),
    ("arg-value", "k.serve.args.--chat-template"),
    ("arg-list-item", "k.serve.args.--allowed-origins"),
    ("arg-inline-value", "k.serve.args.--enable-log-requests=--trust-remote-code"),
    ("override-arg-value", "k.serve.overrides[0].args.--chat-template"),
])
def test_a_value_that_reads_as_a_flag_is_refused_at_its_field(where: str, path: str) -> None:
    recipe = _recipe()
    serve = recipe["serve"]
    if where == "model":
        recipe["model"] = DASHED
    elif where in ("model-path", "load-format"):
        serve[where] = DASHED
    elif where == "draft-model":
        serve["spec-decoding"] = {"method": "eagle3", "num-steps": 3, "draft-model": DASHED}
    elif where == "served-model-name":
        recipe["workload"]["served-model-name"] = DASHED
    elif where == "arg-value":
        serve["args"] = {"--chat-template": DASHED}
    elif where == "arg-list-item":
        serve["args"] = {"--allowed-origins": ["a", DASHED]}
    elif where == "arg-inline-value":
        serve["args"] = {f"--enable-log-requests={DASHED}": True}
    else:
        serve["overrides"] = [{"when": {"tp": 8}, "args": {"--chat-template": DASHED}}]
    errors = _errors(recipe)
    assert [(f.rule, f.path) for f in errors] == [("schema.argv-value", path)], [f.render() for f in errors]
    assert errors[0].line is not None and errors[0].fix and DASHED in errors[0].message


def test_negative_numbers_and_values_with_an_inner_dash_are_values() -> None:
    """argparse reads `-1` and `-0.5` as values (its negative-number rule); a dash inside a word is no flag."""
    recipe = _recipe(args={"--seed": -1, "--x": "-0.5", "--chat-template": "a--b"}, **{"model-path": "/m/-w"})
    assert not _errors(recipe)


def test_the_rendered_launch_keeps_the_model_path_a_positional_word() -> None:
    """The accepted spelling of a dash-named checkpoint (`./-w`) reaches `vllm serve` as its model argument."""
    text = yaml.safe_dump({"k": _recipe(**{"model-path": "./--trust-remote-code"})}, sort_keys=False)
    job = full_sweep(loads_recipes(text, "r.yaml").raise_on_error().recipes)[0]
    assert engines.render(job).argv[:3] == ("vllm", "serve", "./--trust-remote-code")
