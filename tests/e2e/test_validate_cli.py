"""`llmsweep validate | rules | schema` end to end: the seed recipe's four mistakes are loud, exit codes follow."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from test_run_support import cli_here

from llmsweep.words import count_of

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
RESIDENT = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident.yaml"
GOOD_IMAGE = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"
FINDING_KEYS = {"rule", "severity", "file", "line", "path", "jobs", "message", "fix", "evidence"}


def llmsweep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_here(args, {**os.environ, **(env or {})}, cwd=REPO)


def findings(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, object]]]:
    out = llmsweep("validate", "--json", *args, env=env)
    assert "Traceback" not in out.stderr
    return out.returncode, json.loads(out.stdout)


def variant(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / source.name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_seed_recipe_warns_on_provenance_and_fails_on_the_hicache_arm() -> None:
    rc, found = findings(str(SEED))
    assert rc == 2
    assert all(set(f) == FINDING_KEYS for f in found)
    prov = [f for f in found if f["rule"] == "golden-al.precision-provenance"]
    assert prov and prov[0]["severity"] == "warning"
    assert "nvfp4" in str(prov[0]["message"]) and "fp8" in str(prov[0]["message"])
    errors = [f for f in found if f["severity"] == "error"]
    assert {f["rule"] for f in errors} == {"engine.known-incompatibility"}
    inc = errors[0]
    assert "#2563" in str(inc["evidence"]) and "#2693" in str(inc["evidence"])
    assert "page_first_direct" in str(inc["fix"]) and "0.5.17" in str(inc["fix"])
    ids = inc["jobs"]
    # every HiCache job, named in full
    assert isinstance(ids, list) and len(ids) == 4 and all("_kvdram-hicache_" in i for i in ids)
    assert inc["file"] == str(SEED) and inc["line"] == 50 and "overrides[0]" in str(inc["path"])


def test_seed_human_output_renders_each_finding() -> None:
    out = llmsweep("validate", str(SEED))
    assert out.returncode == 2
    assert re.search(r"qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml:50: error \[engine.known-incompatibility\]",
                     out.stdout)
    assert "evidence: InferenceX #2563" in out.stdout and "Traceback" not in out.stderr


def test_json_says_the_totals_the_text_output_says_and_keeps_its_list() -> None:
    """`validate --json` printed only the findings; the text output also says the recipe and job counts and the
    error and warning totals. --json says that same line on stderr; stdout stays the list of findings CI bots read."""
    text = llmsweep("validate", str(SEED))
    as_json = llmsweep("validate", "--json", str(SEED))
    assert text.returncode == as_json.returncode == 2
    (totals,) = [line for line in text.stderr.splitlines() if line.startswith("1 recipe, ")]
    found = json.loads(as_json.stdout)
    assert isinstance(found, list) and all(set(f) == FINDING_KEYS for f in found)
    errors = sum(f["severity"] == "error" for f in found)
    warnings = len(found) - errors
    said = rf"1 recipe, \d+ jobs: {count_of(errors, 'error')}, {count_of(warnings, 'warning')}"
    assert re.fullmatch(said, totals), totals
    assert totals in as_json.stderr.splitlines(), as_json.stderr


def test_resident_recipe_is_clean() -> None:
    out = llmsweep("validate", str(RESIDENT))
    assert out.returncode == 0, out.stdout
    assert "golden-al.precision-provenance" in out.stdout


def test_old_image_fails_the_token_mode_gate_unless_simulated(tmp_path: Path) -> None:
    path = variant(tmp_path, RESIDENT, GOOD_IMAGE, "lmsysorg/sglang:v0.5.12-rocm720-mi30x")
    rc, found = findings(str(path))
    assert rc == 2
    gate = [f for f in found if f["rule"] == "engine.feature-gate"]
    assert gate and gate[0]["severity"] == "error"
    assert "SGLANG_SIMULATE_ACC_TOKEN_MODE" in str(gate[0]["message"]) and "0.5.16" in str(gate[0]["message"])
    rc, found = findings(str(path), "--simulate")
    assert rc == 0
    assert [f["severity"] for f in found if f["rule"] == "engine.feature-gate"] == ["warning"]


def test_client_in_a_python_310_image_fails_client_isolation(tmp_path: Path) -> None:
    image = "lmsysorg/sglang:v0.5.16-rocm720-mi30x"  # Python 3.10
    path = variant(tmp_path, RESIDENT, "  serve:\n", f"  serve:\n    client-image: {image}\n")
    rc, found = findings(str(path))
    assert rc == 2
    assert [f["rule"] for f in found if f["severity"] == "error"] == ["client.isolation"]
    assert "3.10" in str(next(f for f in found if f["rule"] == "client.isolation")["message"])


def test_user_catalog_incompatibility_fails_validate(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "incompatibilities.yaml").write_text(
        "incompatibilities:\n"
        "  lab-aiter-ep8:\n"
        "    engine: sglang\n"
        "    platforms: [rocm]\n"
        "    conditions:\n"
        "      args: {attention-backend: aiter, ep-size: '8'}\n"
        "    severity: error\n"
        "    message: aiter attention with EP8 hangs at warmup in our lab\n"
        "    fix: use --attention-backend triton with ep 8\n"
        "    evidence: lab ticket 42\n", encoding="utf-8")
    rc, found = findings(str(RESIDENT), env={"LLMSWEEP_CATALOG_DIR": str(catalog)})
    assert rc == 2
    hit = next(f for f in found if f["rule"] == "engine.known-incompatibility")
    assert "lab-aiter-ep8" in str(hit["message"]) and hit["evidence"] == "lab ticket 42"
    jobs = hit["jobs"]
    assert isinstance(jobs, list) and jobs and all("-ep8-" in j for j in jobs)
    assert not any("-ep1-" in j for j in jobs)


def test_reference_master_config_validates_with_warnings(shared_dir: Path) -> None:
    rc, found = findings(str(shared_dir / "reference" / "inferencex" / "amd-master.yaml"))
    assert rc == 0
    assert found and all(f["severity"] == "warning" for f in found)


def test_config_keys_select_and_unknown_keys_are_bad_input() -> None:
    rc, found = findings(str(SEED), str(RESIDENT), "--config-keys", "*-resident")
    assert rc == 0 and {str(f["path"]).split(".serve")[0] for f in found} == {
        "qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident"}
    out = llmsweep("validate", str(SEED), "--config-keys", "nope")
    assert out.returncode == 2 and "not found" in out.stderr and "Traceback" not in out.stderr


def test_broken_input_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("k:\n  image: [unclosed\n", encoding="utf-8")
    out = llmsweep("validate", str(bad), str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "Traceback" not in out.stderr + out.stdout
    assert "schema.yaml-syntax" in out.stdout and "schema.file" in out.stdout


@pytest.mark.parametrize("wanted", ["schema.agentic-runner", "schema.kv-offload-backend", "engine.feature-gate",
                                    "golden-al.pinned-differs", "client.isolation", "grid.max-conc"])
def test_rules_lists_schema_and_policy_rules(wanted: str, rules_json: list[dict[str, str]]) -> None:
    rule = next(r for r in rules_json if r["id"] == wanted)
    assert rule["severity"] in ("error", "warning") and rule["title"] and rule["fix"]


@pytest.fixture(scope="module")
def rules_json() -> list[dict[str, str]]:
    out = llmsweep("rules", "--json")
    assert out.returncode == 0
    return json.loads(out.stdout)


def test_rules_human_form_and_schema() -> None:
    out = llmsweep("rules")
    assert out.returncode == 0 and "engine.known-incompatibility  [error, policy]" in out.stdout
    schema = json.loads(llmsweep("schema").stdout)
    assert "serve" in json.dumps(schema) and "policy" in json.dumps(schema)


FIXED = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize(("old", "new", "line", "says"), [
    ("{ tp: 8, conc-list: [2, 4] }", "{ tp: 010, conc-list: [2, 4] }", 16, "got a string '010'"),  # YAML 1.1: 8
    ("isl: 256", "isl: 4:16", 13, "got a string '4:16'"),  # YAML 1.1: 256
    ("isl: 256", "isl: 0x100", 13, "got a string '0x100'"),  # YAML 1.1: 256
])
def test_numbers_are_read_as_written_not_as_yaml_1_1_octal_or_sexagesimal(tmp_path: Path, old: str, new: str,
                                                                         line: int, says: str) -> None:
    rc, found = findings(str(variant(tmp_path, FIXED, old, new)))
    assert rc == 2
    (hit,) = [f for f in found if f["severity"] == "error"]
    assert hit["rule"] == "schema.type" and hit["line"] == line and says in str(hit["message"]), hit


def test_a_control_character_in_a_recipe_is_one_error_with_its_line_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "nul.yaml"
    bad.write_bytes(FIXED.read_bytes().replace(b"model-prefix: qwen3.5", b"model-prefix: qwen\x003.5"))
    for command in (("validate", str(bad)), ("matrix", "full-sweep", "--config-files", str(bad)),
                    ("predict", str(bad))):
        out = llmsweep(*command)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (command, out.stderr[-2000:])
        assert f"{bad}:6" in out.stdout + out.stderr and "control character" in out.stdout + out.stderr, command


def test_an_input_that_plans_no_job_is_an_error_not_a_clean_pass(tmp_path: Path) -> None:
    """An empty search space, or a directory with no recipe in it, planned 0 jobs and exited 0: `matrix` then
    printed an empty matrix and a CI sweep ran nothing, green."""
    arm = "      search-space:\n      - { tp: 8, conc-list: [2, 4] }"
    empty = variant(tmp_path, FIXED, arm, "      search-space: []")
    rc, found = findings(str(empty))
    assert rc == 2
    (hit,) = [f for f in found if f["rule"] == "plan.no-jobs"]
    assert hit["line"] == 3 and hit["path"] == "run-sim-fixed" and "plans no job" in str(hit["message"])
    nothing = tmp_path / "nothing.yaml"
    nothing.mkdir()
    rc, found = findings(str(nothing))
    assert rc == 2 and [f["rule"] for f in found] == ["plan.no-jobs"]
    rc, found = findings(str(REPO / "recipes"))  # a directory of recipes plans its jobs
    assert not [f for f in found if f["rule"] == "plan.no-jobs"]
