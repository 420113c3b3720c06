"""`llmsweep discover` of a file of several recipe keys: the policy the table and `--json` say is each key's, as
proposed.yaml writes it."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import cli_env, cli_here

from llmsweep.spec.loader import load_recipes

FIXED = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def test_two_recipe_keys_are_each_told_their_own_proposed_policy(tmp_path: Path) -> None:
    """Key `capped` has its own `max-conc: 2` below a grid whose knee the short ladder does not reach, so its cap is
    raised to the kept 16; key `free` gets no cap. The table and discovery.json had said one policy, `min-conc-step
    N, max-conc 16`, for the file, which proposed.yaml wrote into one key only."""
    text = FIXED.read_text()
    capped = (text.replace("run-sim-fixed:", "capped:").replace("conc-list: [2, 4]", "conc-list: [2, 16]")
              .replace("  multinode: false\n", "  multinode: false\n  policy: { max-conc: 2 }\n", 1))
    recipe = tmp_path / "two.yaml"
    recipe.write_text(text.replace("run-sim-fixed:", "free:") + capped)
    out = tmp_path / "out"
    proc = cli_here(["discover", str(recipe), "--ladder-top", "4", "--refine", "0", "--out", str(out)],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proposed = load_recipes([out / "proposed.yaml"]).raise_on_error().recipes
    written = {key: (r.policy.min_conc_step, r.policy.max_conc) if r.policy else (None, None)
               for key, r in proposed.items()}
    assert written["free"][1] is None and written["capped"][1] == 16, written
    saved = json.loads((out / "discovery.json").read_text())
    assert {key: (p["min_conc_step"], p["max_conc"]) for key, p in saved["policy"].items()} == written
    # the table names each key's policy, and no key is told another's cap
    line = next(ln for ln in proc.stdout.splitlines() if "; policy: " in ln)
    said = line.split("; policy: ", 1)[1]
    assert said == (f"free: min-conc-step {written['free'][0]}; "
                    f"capped: min-conc-step {written['capped'][0]}, max-conc 16"), line
