"""User curves (`llmsweep al collect`'s output) next to the packaged ones: the file format reads back into the same
provenance, a curve measured in the served precision wins over the default, and the warning names the better curve
when it lacks the cell asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.catalog.golden import CURVES_ENV_VAR, CurveHeader, format_curve, load_curve, resolve_acceptance
from llmsweep.catalog.sources import clear_caches
from llmsweep.cli.catalog import al
from llmsweep.errors import ConfigError
from llmsweep.policy import validate_files

SEED_CASE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy" / "golden-al.precision-provenance.yaml"


def _header(**changes: object) -> CurveHeader:
    base: dict[str, object] = dict(
        source="llmsweep al collect on h200-lent at 2026-12-01T14:00:00Z", checkpoint="qwen3.5-397b-a17b-fp8",
        method="mtp", precision="fp8 (config.json of /models/q)", hardware="1 x NVIDIA H200 (nvidia-smi)",
        engine="vllm 0.26.0 (reported by /version)", dataset="coding (nvidia/SPEED-Bench qualitative/test, 80 prompts)",
        sampling={"thinking_on": {"temperature": 0.6, "top_p": 0.95, "top_k": 20}}, output_len=4096,
        chat_template_kwargs={"thinking_on": {"enable_thinking": True}}, generator="llmsweep al collect (test)",
        notes=["served with --enforce-eager"])
    base.update(changes)
    return CurveHeader.model_validate(base)


def _write(folder: Path, name: str, values: dict[int, float], **changes: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(format_curve(_header(**changes), {"thinking_on": values}))
    return path


def test_the_written_file_reads_back_into_the_provenance_it_states(tmp_path: Path) -> None:
    curve = load_curve(_write(tmp_path, "qwen3.5_mtp_fp8.yaml", {1: 1.9, 2: 2.714, 3: 3.3}))
    assert curve.values == {"thinking_on": {1: 1.9, 2: 2.71, 3: 3.3}}  # two decimals, as InferenceX writes them
    assert (curve.model_prefix, curve.method, curve.variant) == ("qwen3.5", "mtp", "fp8")
    assert curve.checkpoint == "qwen3.5-397b-a17b-fp8" and curve.precision_measured == "fp8"
    assert curve.precision_basis == "header" and curve.hardware == "1 x NVIDIA H200 (nvidia-smi)"
    assert curve.engine == "vllm 0.26.0 (reported by /version)" and curve.output_len == 4096
    assert curve.dataset == "coding (nvidia/SPEED-Bench qualitative/test, 80 prompts)"
    assert curve.sampling_common == {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
    assert curve.sampling["thinking_on"].chat_template_kwargs == {"enable_thinking": True}
    assert curve.notes == ["served with --enforce-eager"] and not curve.simulated and not curve.packaged
    assert curve.source is not None and curve.source.startswith("llmsweep al collect on h200-lent")


def test_a_curve_measured_in_the_served_precision_wins_and_says_what_it_passed_over(tmp_path: Path) -> None:
    _write(tmp_path, "qwen3.5_mtp_fp8.yaml", {1: 1.9, 2: 2.6, 3: 3.1})
    args = ("qwen3.5", "Qwen/Qwen3.5-397B-A17B-FP8", "fp8", "mtp", "on")
    packaged = resolve_acceptance(*args, 3)
    assert packaged is not None and packaged.value == 3.39 and packaged.precision_mismatch()
    fp8 = resolve_acceptance(*args, 3, curve_dirs=[tmp_path])
    assert fp8 is not None and (fp8.curve, fp8.value, fp8.passed_over) == ("qwen3.5_mtp_fp8", 3.1, "qwen3.5_mtp")
    assert not fp8.precision_mismatch()
    nvfp4 = resolve_acceptance("qwen3.5", "", "nvfp4", "mtp", "on", 3, curve_dirs=[tmp_path])
    assert nvfp4 is not None and nvfp4.curve == "qwen3.5_mtp" and nvfp4.passed_over is None and not nvfp4.better
    # The fp8 curve lacks K=5: the default answers, and the resolution names the better curve for the warning.
    k5 = resolve_acceptance(*args, 5, curve_dirs=[tmp_path])
    assert k5 is not None and k5.curve == "qwen3.5_mtp" and k5.value == 4.41
    assert k5.better == ["qwen3.5_mtp_fp8 (fp8, on K 1 2 3)"]


MXFP4 = dict(checkpoint="qwen3.5-397b-a17b-mxfp4", precision="mxfp4 (hf_quant_config.json of /models/q: quant_algo "
             "MXFP4)", hardware="1 x AMD Instinct MI355X (amd-smi)")


def test_a_curve_measured_on_the_mxfp4_checkpoint_wins_for_it_and_only_for_it(tmp_path: Path) -> None:
    """AMD's MXFP4 checkpoint, served at precision `fp4`: a curve collected on it passes over the packaged NVFP4 one
    (it had not: both were `fp4`, so the NVFP4 3.39 answered); an NVFP4 recipe keeps the NVFP4 curve, and a bare
    `fp4` one cannot be told to be MXFP4, so the default (which it may be) answers."""
    _write(tmp_path, "qwen3.5_mtp_mxfp4.yaml", {2: 2.5, 3: 3.05}, **MXFP4)
    amd = resolve_acceptance("qwen3.5", "amd/Qwen3.5-397B-A17B-MXFP4", "fp4", "mtp", "on", 3, curve_dirs=[tmp_path])
    assert amd is not None and (amd.curve, amd.value, amd.passed_over) == ("qwen3.5_mtp_mxfp4", 3.05, "qwen3.5_mtp")
    assert not amd.precision_mismatch()
    for model, precision in (("nvidia/Qwen3.5-397B-A17B-NVFP4", "fp4"), ("", "nvfp4"), ("", "fp4")):
        r = resolve_acceptance("qwen3.5", model, precision, "mtp", "on", 3, curve_dirs=[tmp_path])
        assert r is not None and (r.curve, r.value, r.passed_over, r.better) == ("qwen3.5_mtp", 3.39, None, [])
    # the MXFP4 curve lacks K=5: the NVFP4 default answers, and the warning names the curve to complete
    k5 = resolve_acceptance("qwen3.5", "amd/Qwen3.5-397B-A17B-MXFP4", "fp4", "mtp", "on", 5, curve_dirs=[tmp_path])
    assert k5 is not None and k5.curve == "qwen3.5_mtp" and k5.precision_mismatch()
    assert k5.better == ["qwen3.5_mtp_mxfp4 (mxfp4, on K 2 3)"]


def test_a_curve_of_the_very_served_format_wins_over_a_bare_fp4_one(tmp_path: Path) -> None:
    """Both a bare-`fp4` curve and an MXFP4 one could stand in for the NVFP4 default on an MXFP4 checkpoint (the bare
    one cannot be told apart from it); the one measured in MXFP4 itself is pinned, whatever their names' order."""
    _write(tmp_path, "qwen3.5_mtp_fp4.yaml", {3: 3.2}, checkpoint="qwen3.5-397b-a17b-fp4", precision="fp4 (recipe)")
    _write(tmp_path, "qwen3.5_mtp_mxfp4.yaml", {3: 3.05}, **MXFP4)
    amd = resolve_acceptance("qwen3.5", "amd/Qwen3.5-397B-A17B-MXFP4", "fp4", "mtp", "on", 3, curve_dirs=[tmp_path])
    assert amd is not None and (amd.curve, amd.value) == ("qwen3.5_mtp_mxfp4", 3.05)


DSV4_MXFP4 = dict(checkpoint="deepseek-v4-pro-mxfp4", precision="mxfp4 (quantization_config of /models/d)",
                  hardware="8 x AMD Instinct MI355X (amd-smi)", sampling={"thinking_on": {"temperature": 1.0}},
                  chat_template_kwargs={"thinking_on": {"thinking": True, "reasoning_effort": "high"}})


def test_a_curve_of_the_served_format_wins_over_a_default_read_as_bare_fp4(tmp_path: Path) -> None:
    """dsv4_mtp (like dsv4-pro-0813-dspark, kimik3_dspark, minimaxm3_eagle3) reads as a bare `fp4` from its script's
    name, which agrees with MXFP4 and NVFP4 alike: an MXFP4 collection had never won for amd/DeepSeek-V4-Pro-MXFP4
    (2.49 pinned) and was not even named as the better curve where it lacks the cell. Measured in the very format
    served, with the cell and the default's sampling, it wins."""
    _write(tmp_path, "dsv4_mtp_mxfp4.yaml", {1: 1.75, 2: 2.2, 3: 2.41}, **DSV4_MXFP4)
    args = ("dsv4", "amd/DeepSeek-V4-Pro-MXFP4", "fp4", "mtp", "on")
    amd = resolve_acceptance(*args, 3, curve_dirs=[tmp_path])
    assert amd is not None and (amd.curve, amd.value, amd.passed_over) == ("dsv4_mtp_mxfp4", 2.41, "dsv4_mtp")
    assert not amd.precision_mismatch()
    k5 = resolve_acceptance(*args, 5, curve_dirs=[tmp_path])
    assert k5 is not None and (k5.curve, k5.value) == ("dsv4_mtp", 2.55)
    assert k5.better == ["dsv4_mtp_mxfp4 (mxfp4, on K 1 2 3)"]
    got = CliRunner().invoke(al, ["amd/DeepSeek-V4-Pro-MXFP4", "-m", "mtp", "-k", "3", "--precision", "fp4",
                                  "--curves", str(tmp_path), "--json"])
    assert got.exit_code == 0 and json.loads(got.stdout)["curve"] == "dsv4_mtp_mxfp4", got.output
    # a bare-fp4 recipe (an id naming no format) may serve either block format: the default answers; an NVFP4
    # recipe is not served by the MXFP4 curve; nor does a collection sampled otherwise stand in
    for model, precision in (("deepseek-ai/DeepSeek-V4-Pro", "fp4"), ("deepseek-ai/DeepSeek-V4-Pro", "nvfp4")):
        r = resolve_acceptance("dsv4", model, precision, "mtp", "on", 3, curve_dirs=[tmp_path])
        assert r is not None and (r.curve, r.value, r.passed_over, r.better) == ("dsv4_mtp", 2.49, None, []), r
    hot = tmp_path / "hot"
    _write(hot, "dsv4_mtp_mxfp4.yaml", {3: 2.41}, **{**DSV4_MXFP4, "sampling": {"thinking_on": {"temperature": 0.6}}})
    unlike = resolve_acceptance(*args, 3, curve_dirs=[hot])
    assert unlike is not None and unlike.curve == "dsv4_mtp" and unlike.unlike == [
        "dsv4_mtp_mxfp4 (temperature 0.6, not 1)"]


def test_a_curve_collected_on_the_simulator_never_passes_over_a_measured_one(tmp_path: Path) -> None:
    """`al collect --simulate` writes `simulated: yes`: its ALs are the simulator's acceptance model. Served in FP8,
    the recipe keeps the packaged (measured, NVFP4) 3.39 rather than the simulated FP8 curve's 2.0 — that pin would
    have passed `validate` with no finding — and its provenance warning still names the precision."""
    _write(tmp_path, "qwen3.5_mtp_fp8.yaml", {3: 2.0}, simulated=True)
    args = ("qwen3.5", "Qwen/Qwen3.5-397B-A17B-FP8", "fp8", "mtp", "on", 3)
    got = resolve_acceptance(*args, curve_dirs=[tmp_path])
    assert got is not None and (got.curve, got.value, got.passed_over) == ("qwen3.5_mtp", 3.39, None)
    assert got.precision_mismatch() and not got.simulated and not got.better
    _write(tmp_path / "measured", "qwen3.5_mtp_fp8.yaml", {3: 2.0})  # the same cell measured on an engine wins
    measured = resolve_acceptance(*args, curve_dirs=[tmp_path / "measured"])
    assert measured is not None and (measured.curve, measured.value) == ("qwen3.5_mtp_fp8", 2.0)


def test_al_warns_naming_the_better_curve_that_lacks_the_cell(tmp_path: Path) -> None:
    _write(tmp_path, "qwen3.5_mtp_fp8.yaml", {1: 1.9, 2: 2.6})
    runner = CliRunner()
    got = runner.invoke(al, ["Qwen/Qwen3.5-397B-A17B-FP8", "-m", "mtp", "-k", "3", "--curves", str(tmp_path)])
    assert got.exit_code == 0, got.output
    assert got.stdout.startswith("3.39")
    assert "the curve measured in fp8, qwen3.5_mtp_fp8 (fp8, on K 1 2), lacks thinking on K=3" in got.stderr
    got = runner.invoke(al, ["Qwen/Qwen3.5-397B-A17B-FP8", "-m", "mtp", "-k", "2", "--curves", str(tmp_path)])
    assert got.exit_code == 0 and got.stdout.startswith("2.60") and "warning" not in got.stderr
    assert "chosen over" in got.stdout and "qwen3.5_mtp" in got.stdout
    # the golden curve's sampling, which a collection must match to stand in for it
    packaged = runner.invoke(al, ["Qwen/Qwen3.5-397B-A17B-FP8", "-m", "mtp", "-k", "3", "--thinking", "off"])
    assert "temperature 0.7 top_p 0.8 top_k 20 presence_penalty 1.5" in packaged.stdout, packaged.output


def test_the_policy_warning_names_the_better_curve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "qwen3.5_mtp_fp8.yaml", {1: 1.9, 2: 2.6})
    monkeypatch.setenv(CURVES_ENV_VAR, str(tmp_path))
    clear_caches()
    try:
        findings = [f for f in validate_files([SEED_CASE]).findings if f.rule == "golden-al.precision-provenance"]
    finally:
        monkeypatch.delenv(CURVES_ENV_VAR)
        clear_caches()
    assert findings and "qwen3.5_mtp_fp8 (fp8, on K 1 2), lacks thinking on K=3" in findings[0].message


AMD_CASE = SEED_CASE.with_name("golden-al.precision-provenance-mxfp4.yaml")


def test_an_mxfp4_recipe_is_warned_of_the_nvfp4_curve_and_an_nvfp4_or_bare_fp4_one_is_not(tmp_path: Path) -> None:
    """InferenceX's qwen3.5-fp4-mi355x-sglang-agentic-mtp (amd/Qwen3.5-397B-A17B-MXFP4, precision fp4) pinned the
    3.39 measured on the NVFP4 checkpoint with no word: warned, naming both precisions, and still pinned (a warning).
    The same recipe serving NVIDIA's NVFP4 checkpoint, or a checkpoint whose id names no format, is not warned."""
    rule = "golden-al.precision-provenance"
    checked = validate_files([AMD_CASE])
    [finding] = [f for f in checked.findings if f.rule == rule]
    assert not finding.is_error and "(nvfp4)" in finding.message and "(mxfp4, as its id names it; precision fp4)" \
        in finding.message
    assert checked.ok and checked.jobs and all(j.acceptance is not None and j.acceptance.value == 3.39
                                               for j in checked.jobs)
    text = AMD_CASE.read_text(encoding="utf-8")
    for model in ("nvidia/Qwen3.5-397B-A17B-NVFP4", "Qwen/Qwen3.5-397B-A17B"):
        other = tmp_path / f"{model.replace('/', '_')}.yaml"
        other.write_text(text.replace("model: amd/Qwen3.5-397B-A17B-MXFP4", f"model: {model}"))
        got = validate_files([other])
        assert got.jobs and all(j.acceptance is not None for j in got.jobs), model
        assert not [f for f in got.findings if f.rule == rule], model


def test_the_planner_pins_the_curve_measured_on_the_mxfp4_checkpoint(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "qwen3.5_mtp_mxfp4.yaml", {3: 3.05}, **MXFP4)
    monkeypatch.setenv(CURVES_ENV_VAR, str(tmp_path))
    clear_caches()
    try:
        checked = validate_files([AMD_CASE])
    finally:
        monkeypatch.delenv(CURVES_ENV_VAR)
        clear_caches()
    assert checked.jobs and all(j.acceptance is not None and j.acceptance.value == 3.05 for j in checked.jobs)
    assert not [f for f in checked.findings if f.rule == "golden-al.precision-provenance"]
    # a curve chosen for the precision it was measured in is no sampling variant of the default's: no
    # `golden-al.variant` ("the same drafter was measured under other sampling too") for the sampling it shares
    assert not [f for f in checked.findings if f.rule == "golden-al.variant"], checked.findings


def test_only_a_job_that_pins_the_golden_al_is_warned_about_its_provenance(tmp_path: Path) -> None:
    """The seed recipe's FP8 agentic MTP job pins the NVFP4-measured 3.39: warned. The same recipe as a fixed-length
    sweep measures its own acceptance (real verification), so where the curve was measured is not its concern."""
    text = SEED_CASE.read_text(encoding="utf-8")
    agentic = ("agentic-coding:\n    - dram-utilization: 0.80\n      search-space:\n"
               "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4, 8, 16] }")
    assert agentic in text
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(text.replace(agentic, "fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
                                           "      - { tp: 8, spec-decoding: mtp, conc-list: [4, 8, 16] }"))
    rule = "golden-al.precision-provenance"
    assert len([f for f in validate_files([SEED_CASE]).findings if f.rule == rule]) == 1  # one per recipe
    checked = validate_files([fixed])
    assert len(checked.jobs) == 3 and all(j.acceptance is None for j in checked.jobs)
    assert not [f for f in checked.findings if f.rule == rule]


def test_a_missing_curve_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as info:
        resolve_acceptance("qwen3.5", "", "fp8", "mtp", "on", 3, curve_dirs=[tmp_path / "nope"])
    assert info.value.fix is not None and "al collect" in info.value.fix


def test_a_user_curve_named_as_a_packaged_one_is_refused_not_swapped_in(tmp_path: Path) -> None:
    # A user file qwen3.5_mtp.yaml would replace the packaged curve whole, losing every cell it does not hold
    # (the seed recipe's thinking on K=3 = 3.39 among them): it is refused, naming the file and the rename.
    user = _write(tmp_path, "qwen3.5_mtp.yaml", {1: 1.9})
    with pytest.raises(ConfigError, match="packaged") as info:
        resolve_acceptance("qwen3.5", "", "fp8", "mtp", "on", 3, curve_dirs=[tmp_path])
    assert str(user) in info.value.message
    assert info.value.fix is not None and "qwen3.5_mtp_<variant>.yaml" in info.value.fix


def test_a_curve_sending_a_key_the_golden_curve_leaves_to_the_server_does_not_stand_in_for_it(
        tmp_path: Path) -> None:
    # DSv4's curve states only temperature 1.0: top_p and top_k were the server's. A collection that sent llmsweep's
    # own 0.95 / 40 was sampled otherwise; one that sent only the temperature was not.
    dsv4 = {"checkpoint": "deepseek-v4-pro-fp8", "chat_template_kwargs": {"thinking_on": {"thinking": True}}}
    _write(tmp_path / "sent", "dsv4_mtp_fp8.yaml", {2: 2.0}, **dsv4,
           sampling={"thinking_on": {"temperature": 1.0, "top_p": 0.95, "top_k": 40}})
    _write(tmp_path / "left", "dsv4_mtp_fp8.yaml", {2: 2.0}, **dsv4, sampling={"thinking_on": {"temperature": 1.0}})
    args = ("dsv4", "deepseek-ai/DeepSeek-V4-Pro-FP8", "fp8", "mtp", True, 2)
    sent = resolve_acceptance(*args, curve_dirs=[tmp_path / "sent"])
    assert sent is not None and sent.curve == "dsv4_mtp" and sent.passed_over is None
    assert sent.unlike == ["dsv4_mtp_fp8 (top_p 0.95, not unstated; top_k 40, not unstated)"]
    left = resolve_acceptance(*args, curve_dirs=[tmp_path / "left"])
    assert left is not None and (left.curve, left.passed_over, left.unlike) == ("dsv4_mtp_fp8", "dsv4_mtp", [])
    assert left.sampling == {"temperature": 1.0}  # as the curve states it: presence_penalty is unstated too


def test_al_prints_the_sampling_the_resolution_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    # one route to the value: the table prints what resolve_acceptance answered, not a sampling of its own reading
    import llmsweep.catalog.golden as golden_mod

    real = golden_mod.resolve_acceptance

    def resolve(*args: object, **kwargs: object) -> object:
        res = real(*args, **kwargs)  # type: ignore[arg-type]
        assert res is not None
        return res.model_copy(update={"sampling": {"temperature": 0.123, "top_p": 0.5, "top_k": 7.0}})

    monkeypatch.setattr(golden_mod, "resolve_acceptance", resolve)
    got = CliRunner().invoke(al, ["dsv4", "-m", "mtp", "-k", "2"])
    assert got.exit_code == 0, got.output
    assert "temperature 0.123 top_p 0.5 top_k 7; presence_penalty unstated (the server's default)" in got.stdout
    monkeypatch.undo()
    packaged = CliRunner().invoke(al, ["dsv4", "-m", "mtp", "-k", "2"])
    assert "temperature 1; top_p, top_k, presence_penalty unstated (the server's default)" in packaged.stdout


def test_al_names_a_simulated_curve_of_the_served_precision_it_left_out(tmp_path: Path) -> None:
    """A simulated FP8 curve holding the cell does not pass over the measured NVFP4 one; `al --precision fp8` says so,
    naming it, instead of claiming no FP8 curve is known."""
    path = _write(tmp_path, "qwen3.5_mtp_fp8.yaml", {3: 3.21}, simulated=True)
    got = resolve_acceptance("qwen3.5", "", "fp8", "mtp", "on", 3, curve_dirs=[tmp_path])
    assert got is not None and (got.curve, got.value) == ("qwen3.5_mtp", 3.39)
    assert got.simulated_left_out == [f"qwen3.5_mtp_fp8 ({path})"] and not got.better
    lacking = resolve_acceptance("qwen3.5", "", "fp8", "mtp", "on", 2, curve_dirs=[tmp_path])
    assert lacking is not None and lacking.simulated_left_out == []  # it does not hold K=2: nothing left out
    shown = CliRunner().invoke(al, ["qwen3.5", "-m", "eagle", "-k", "3", "--precision", "fp8", "--curves",
                                    str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("3.39") and "left out" in shown.stdout
    assert "no curve for fp8 is known" not in shown.stderr
    assert "the curve collected on llmsweep's simulator in fp8, qwen3.5_mtp_fp8" in shown.stderr
    assert "a modelled AL never stands in for a measured one" in shown.stderr


def test_a_cell_or_entry_written_twice_is_refused_naming_both_lines(tmp_path: Path, user_catalog: Path) -> None:
    """A hand-edited curve holding `2: 1.56` and then `2: 2.90` read as 2.90 in silence (YAML keeps the later key), and
    `al collect --merge-into` carried that into the rewritten curve; a user catalog entry given twice lost its first
    the same way. Every catalog file refuses a key written twice, with both lines."""
    curve = _write(tmp_path / "curves", "qwen3.5_mtp_fp8.yaml", {1: 1.8, 2: 1.56})
    text = curve.read_text()
    assert "    2: 1.56\n" in text
    curve.write_text(text.replace("    2: 1.56\n", "    2: 1.56\n    2: 2.90\n"))
    line = curve.read_text().splitlines().index("    2: 2.90") + 1
    with pytest.raises(ConfigError) as refused:
        load_curve(curve)
    assert refused.value.message == (f"{curve}:{line}:5: `2` is given twice in one mapping (first at line {line - 1}, "
                                     "column 5)")
    assert "keep one of the two" in (refused.value.fix or "")
    from llmsweep.catalog.hardware import get_hardware

    (user_catalog / "hardware.yaml").write_text("hardware:\n  my-gpu:\n    hbm_gb: 80\n  my-gpu:\n    hbm_gb: 141\n")
    clear_caches()
    try:
        with pytest.raises(ConfigError, match=r"hardware.yaml:4:3: `my-gpu` is given twice in one mapping \(first "
                                              r"at line 2, column 3\)"):
            get_hardware("my-gpu")
    finally:
        clear_caches()


def test_a_key_written_twice_on_one_line_is_refused_naming_its_line_and_column(tmp_path: Path,
                                                                                user_catalog: Path) -> None:
    """A flow mapping writes every key on one line: `{1: 1.77, 2: 2.28, 2: 2.90}` read as 2.90 in silence (the check
    compared lines), in a curve and in eval_thresholds.yaml alike. The key is what repeats, wherever it is written."""
    curve = _write(tmp_path / "curves", "qwen3.5_mtp_fp8.yaml", {1: 1.77, 2: 2.28})
    text = curve.read_text()
    block = "  thinking_on:\n    1: 1.77\n    2: 2.28\n"
    assert block in text
    curve.write_text(text.replace(block, "  thinking_on: {1: 1.77, 2: 2.28, 2: 2.90}\n"))
    ((line, written),) = [(i, s) for i, s in enumerate(curve.read_text().splitlines(), 1) if "2: 2.90" in s]
    first, second = written.index("2: 2.28") + 1, written.index("2: 2.90") + 1
    with pytest.raises(ConfigError) as refused:
        load_curve(curve)
    assert refused.value.message == (f"{curve}:{line}:{second}: `2` is given twice in one mapping (first at line "
                                     f"{line}, column {first})")
    assert "keep one of the two" in (refused.value.fix or "")

    from llmsweep.catalog.eval_thresholds import threshold_for

    floors = user_catalog / "eval_thresholds.yaml"
    floors.write_text("thresholds:\n  qwen3.5: { gsm8k: { exact_match: 0.5, exact_match: 0.94 } }\n")
    clear_caches()
    try:
        with pytest.raises(ConfigError, match=r"eval_thresholds.yaml:2:41: `exact_match` is given twice in one "
                                              r"mapping \(first at line 2, column 23\)"):
            threshold_for("qwen3.5", "gsm8k", "exact_match,strict-match")
    finally:
        clear_caches()
