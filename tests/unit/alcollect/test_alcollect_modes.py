"""Each thinking mode sampled as the model's golden curve states it (`llmsweep al collect`'s per-mode defaults), and
thinking on collected only where the model's chat template has a thinking switch."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from llmsweep.alcollect.collect import collection_job
from llmsweep.alcollect.modes import plan_modes, thinking_switch
from llmsweep.alcollect.settings import CollectSettings, Sampling
from llmsweep.catalog.golden import get_curve
from llmsweep.cli.alcollect import collect
from llmsweep.errors import ConfigError
from llmsweep.plan import Job, jobs_from_files

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n"
             "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
             "{% endif %}")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
IGNORES_IT = CHATML + "{# enable_thinking is read by another engine's template #}"
ON, OFF = {"enable_thinking": True}, {"enable_thinking": False}


def test_each_mode_defaults_to_the_sampling_qwens_golden_curve_states_for_it() -> None:
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    planned = plan_modes(["thinking_off", "thinking_on"], references=[qwen])
    assert planned["thinking_on"].sampling == Sampling(temperature=0.6, top_p=0.95, top_k=20, presence_penalty=0.0)
    assert planned["thinking_off"].sampling == Sampling(temperature=0.7, top_p=0.8, top_k=20, presence_penalty=1.5)
    assert planned["thinking_on"].chat_template_kwargs == ON and planned["thinking_off"].chat_template_kwargs == OFF
    assert "as qwen3.5_mtp states them for thinking_off" in planned["thinking_off"].describe()


def test_an_option_for_every_mode_beats_the_curve_and_a_modes_own_option_beats_both() -> None:
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    planned = plan_modes(["thinking_off", "thinking_on"], references=[qwen], every_mode={"top_k": 40},
                         every_mode_origin={"top_k": "given (--top-k)"}, per_mode={"thinking_on": {"top_k": "50"}},
                         kwargs={"thinking_on": {"thinking": True}})
    assert planned["thinking_off"].sampling.top_k == 40 and planned["thinking_on"].sampling.top_k == 50
    assert planned["thinking_off"].sampling.temperature == 0.7  # the rest as the curve states it
    assert planned["thinking_on"].chat_template_kwargs == {"thinking": True}
    assert "top_k given (--top-k)" in planned["thinking_off"].describe()
    assert "top_k given for on" in planned["thinking_on"].describe()


def test_a_model_without_a_curve_samples_with_the_defaults() -> None:
    planned = plan_modes(["thinking_off"])
    assert planned["thinking_off"].sampling == Sampling() and planned["thinking_off"].chat_template_kwargs == OFF
    assert "llmsweep's default" in planned["thinking_off"].describe()


def test_one_sampling_given_for_all_modes_samples_each_and_each_mode_is_its_own() -> None:
    one = Sampling(temperature=0.6)
    settings = CollectSettings(ks=[1], thinking=["thinking_off", "thinking_on"], sampling=one)
    assert settings.sampling_of("thinking_off") == settings.sampling_of("thinking_on") == one
    per_mode = CollectSettings(ks=[1], thinking=["thinking_off", "thinking_on"], sampling={"thinking_on": one})
    assert per_mode.sampling_of("thinking_on") == one and per_mode.sampling_of("thinking_off") == Sampling()


def _job_serving(tmp_path: Path, template: str | None, chat_template_arg: str | None = None) -> tuple[Job, Path]:
    """The test n-gram recipe serving a model directory holding `template` as its chat_template.jinja (and a
    `--chat-template` serve arg, where given)."""
    model = tmp_path / "model"
    model.mkdir()
    if template is not None:
        (model / "chat_template.jinja").write_text(template)
    (recipe,) = yaml.safe_load(RECIPE.read_text()).values()
    recipe["serve"]["model-path"] = str(model)
    if chat_template_arg is not None:
        recipe["serve"]["args"]["--chat-template"] = chat_template_arg
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"llama-1b-ngram-local": recipe}, sort_keys=False))
    return collection_job(jobs_from_files([path]), simulate=True), path


@pytest.mark.parametrize(("template", "present", "said"), [
    (QWEN_LIKE, True, "renders another prompt with thinking on"),
    (CHATML, False, "reads none of enable_thinking"),
    (IGNORES_IT, False, "renders the same prompt with thinking on"),
    (None, None, "no chat template to check"),
])
def test_the_thinking_switch_is_read_from_the_models_chat_template(tmp_path: Path, template: str | None,
                                                                   present: bool | None, said: str) -> None:
    job, _ = _job_serving(tmp_path, template)
    switch = thinking_switch(job, ON, OFF)
    assert switch.present is present and said in switch.why


@pytest.mark.parametrize(("model_template", "arg", "present", "said"), [
    # vLLM takes the template inline too: it replaces the model directory's, either way round
    (CHATML, QWEN_LIKE, True, "the chat template (the inline --chat-template serve arg) renders another prompt"),
    (QWEN_LIKE, CHATML, False, "the chat template (the inline --chat-template serve arg) reads none of"),
    (QWEN_LIKE, "file", False, "reads none of"),
])
def test_a_chat_template_serve_arg_replaces_the_model_directorys_template(
        tmp_path: Path, model_template: str, arg: str, present: bool, said: str) -> None:
    if arg == "file":
        arg = str(tmp_path / "served.jinja")
        Path(arg).write_text(CHATML)
        said = f"the chat template (--chat-template {arg}) {said}"
    job, _ = _job_serving(tmp_path, model_template, arg)
    switch = thinking_switch(job, ON, OFF)
    assert switch.present is present and said in switch.why


def test_a_chat_template_path_not_readable_here_is_not_judged_by_the_models_template(tmp_path: Path) -> None:
    # a path inside the engine's container: neither the model directory's template nor a golden curve measured with
    # the model's own template says what the served one does
    job, recipe = _job_serving(tmp_path, QWEN_LIKE, "/opt/templates/no-thinking.jinja")
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    switch = thinking_switch(job, ON, OFF, [qwen])
    assert switch.present is None
    assert "--chat-template /opt/templates/no-thinking.jinja is not readable here" in switch.why
    # --thinking on is collected with a warning and the header says it was not checked
    got = CliRunner().invoke(collect, [str(recipe), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                       "--output-len", "8", "-k", "1", "--thinking", "on", "--out",
                                       str(tmp_path / "out")])
    assert got.exit_code == 0, got.output
    assert "warning: thinking on is not checked against the model's chat template" in got.output
    (curve_file,) = (tmp_path / "out").glob("*.yaml")
    assert "is not readable here" in curve_file.read_text()


def test_a_measured_golden_curve_of_thinking_on_says_the_switch_exists_where_no_template_is_at_hand(
        tmp_path: Path) -> None:
    job, _ = _job_serving(tmp_path, None)
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    assert thinking_switch(job, ON, OFF, [qwen]).present is True
    assert thinking_switch(job, {"thinking": True}, OFF, [qwen]).present is None  # not the kwargs it was measured with


def test_thinking_on_is_refused_before_any_server_where_the_template_has_no_switch(tmp_path: Path) -> None:
    _, recipe = _job_serving(tmp_path, CHATML)
    got = CliRunner().invoke(collect, [str(recipe), "--simulate", "--prompts", "builtin", "-k", "1", "--thinking",
                                       "off", "on", "--out", str(tmp_path / "out")])
    assert isinstance(got.exception, ConfigError), got.output
    assert "thinking on would collect the thinking-off curve under another label" in got.exception.message
    assert got.exception.fix is not None and "--thinking off" in got.exception.fix
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("given", "named"), [
    ("on=temp=0.6", "'temp=0.6' is not KEY=VALUE"),
    ("both=temperature=0.6", "is not on=KEY=VALUE"),
    ("on=top_p=1.5", "the sampling of thinking_on is not valid: top_p 1.5 (given for on)"),
])
def test_a_sampling_option_that_is_not_one_is_refused_naming_it(tmp_path: Path, given: str, named: str) -> None:
    got = CliRunner().invoke(collect, [str(RECIPE), "--simulate", "-k", "1", "--sampling", given,
                                       "--out", str(tmp_path / "out")])
    assert isinstance(got.exception, ConfigError), got.output
    assert named in got.exception.message and not (tmp_path / "out").exists()


def test_a_key_the_golden_curve_leaves_unstated_is_not_sent_and_the_command_says_so() -> None:
    # DSv4's curve states only temperature 1.0 (InferenceX's collector left top_p and top_k to the server): sending
    # llmsweep's 0.95 / 40 would sample otherwise than the curve the collection is to stand in for
    dsv4 = get_curve("dsv4_mtp")
    assert dsv4 is not None
    planned = plan_modes(["thinking_on"], references=[dsv4])["thinking_on"]
    assert planned.sampling == Sampling(temperature=1.0, top_p=None, top_k=None, presence_penalty=None)
    assert planned.sampling.params() == {"temperature": 1.0}  # what the requests send and the header states
    assert ("thinking_on: temperature 1 (temperature as dsv4_mtp states them for thinking_on); not sent: top_p, "
            "top_k, presence_penalty (unstated by dsv4_mtp for thinking_on: the server's default)"
            in planned.describe())
    # an option still sets such a key, saying so
    given = plan_modes(["thinking_on"], references=[dsv4], every_mode={"top_p": 0.9},
                       every_mode_origin={"top_p": "given (--top-p)"})["thinking_on"]
    assert given.sampling.params() == {"temperature": 1.0, "top_p": 0.9}
    assert "top_p given (--top-p)); not sent: top_k, presence_penalty" in given.describe()
    # a mode no curve speaks for samples with llmsweep's defaults, presence_penalty unsent
    assert plan_modes(["thinking_off"])["thinking_off"].sampling.params() == {"temperature": 1.0, "top_p": 0.95,
                                                                              "top_k": 40}


def test_the_sampling_options_are_declared_once_one_per_sampling_field() -> None:
    # SAMPLING_FLAGS is what the options are made of: a field of Sampling gets its option (spelled from its name,
    # typed as the field) and every-mode value without another list to keep in step
    from llmsweep.cli.alcollect import SAMPLING_FLAGS, _sampling_options

    assert SAMPLING_FLAGS == {"temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
                              "presence_penalty": "--presence-penalty"}
    command = _sampling_options(click.command()(lambda **given: given))
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    assert {name: o.opts for name, o in options.items()} == {name: [flag] for name, flag in SAMPLING_FLAGS.items()}
    from llmsweep.cli.options import FiniteRange

    assert options["top_k"].type is click.INT and isinstance(options["top_p"].type, FiniteRange)  # nan/inf refused
    assert all(o.default is None for o in options.values())
    assert command.main(["--top-k", "20", "--presence-penalty", "1.5"], standalone_mode=False) == {
        "temperature": None, "top_p": None, "top_k": 20, "presence_penalty": 1.5}
    assert [p.name for p in collect.params if p.name in SAMPLING_FLAGS] == list(SAMPLING_FLAGS)


@pytest.mark.parametrize(("template", "suggested"), [(CHATML, False), (None, True)])
def test_thinking_off_only_suggests_thinking_on_only_where_the_template_cannot_be_read(
        tmp_path: Path, template: str | None, suggested: bool) -> None:
    # a template read and found without a switch refuses --thinking off on: the hint must not suggest it
    _, recipe = _job_serving(tmp_path, template)
    got = CliRunner().invoke(collect, [str(recipe), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                       "--output-len", "8", "-k", "1", "--out", str(tmp_path / "out")])
    assert got.exit_code == 0, got.output
    assert "thinking off only:" in got.stderr
    assert ("pass --thinking off on" in got.stderr) is suggested, got.stderr
    if not suggested:
        assert "thinking on would collect the thinking-off curve under another label" in got.stderr
        refused = CliRunner().invoke(collect, [str(recipe), "--simulate", "--prompts", "builtin", "-k", "1",
                                               "--thinking", "off", "on", "--out", str(tmp_path / "out2")])
        assert isinstance(refused.exception, ConfigError)


@pytest.mark.parametrize(("args", "said", "fix"), [
    (["--thinking", "off", "--sampling", "on=temperature=0.6"],
     "--sampling on=… samples thinking_on, which this collection does not collect (thinking off)",
     "drop --sampling on=…, or collect the mode: --thinking off on"),
    (["--thinking", "off", "--chat-template-kwargs", 'on={"enable_thinking": true}'],
     "--chat-template-kwargs on=… configures thinking_on, which this collection does not collect (thinking off)",
     "drop --chat-template-kwargs on=…, or collect the mode: --thinking off on"),
    (["--sampling", "off=temperature=0.6", "--sampling", "off=temperature=0.9"],
     "--sampling gives off twice ('off=temperature=0.6' and 'off=temperature=0.9')", "pass one --sampling off="),
    (["--chat-template-kwargs", 'on={"enable_thinking": true}', "--chat-template-kwargs", "on={}"],
     "--chat-template-kwargs gives on twice", "pass one --chat-template-kwargs on=JSON"),
    # Python's JSON reader takes these words; no server's does: every request of the collection would carry them
    (["--chat-template-kwargs", 'off={"x": NaN}'], "is not on=JSON or off=JSON (NaN and Infinity are not JSON)",
     "--chat-template-kwargs 'on="),
    (["--chat-template-kwargs", 'off={"x": -Infinity}'], "is not on=JSON or off=JSON", "--chat-template-kwargs"),
])
def test_a_sampling_not_used_or_given_twice_is_refused_before_any_server(tmp_path: Path, args: list[str], said: str,
                                                                          fix: str) -> None:
    got = CliRunner().invoke(collect, [str(RECIPE), "--simulate", "--prompts", "builtin", "-k", "1", *args,
                                       "--out", str(tmp_path / "out")])
    assert isinstance(got.exception, ConfigError), got.output
    assert said in got.exception.message and got.exception.fix is not None and fix in got.exception.fix
    assert not (tmp_path / "out").exists()


def test_a_sampling_for_thinking_on_of_a_model_without_the_switch_is_refused_not_dropped(tmp_path: Path) -> None:
    _, recipe = _job_serving(tmp_path, CHATML)  # default modes: off only, so on's sampling would be ignored
    got = CliRunner().invoke(collect, [str(recipe), "--simulate", "--prompts", "builtin", "-k", "1", "--sampling",
                                       "on=temperature=0.6", "--out", str(tmp_path / "out")])
    assert isinstance(got.exception, ConfigError), got.output
    assert got.exception.fix is not None and "--thinking off on" not in got.exception.fix
    assert "the model has no thinking switch" in got.exception.fix and not (tmp_path / "out").exists()


def test_a_mode_whose_golden_curve_states_no_kwargs_sends_none_where_another_mode_states_some() -> None:
    # DSv4's curve states chat-template kwargs for thinking on only (InferenceX passed them for that mode alone): its
    # thinking-off cells were served at the template's default, so a collection standing in for them sends nothing
    dsv4 = get_curve("dsv4_mtp")
    assert dsv4 is not None
    planned = plan_modes(["thinking_off", "thinking_on"], references=[dsv4])
    assert planned["thinking_off"].chat_template_kwargs == {}
    assert "dsv4_mtp states none for thinking_off" in planned["thinking_off"].kwargs_origin
    assert planned["thinking_on"].chat_template_kwargs == {"thinking": True, "reasoning_effort": "high"}
    # a curve that states both keeps its own; with no curve, llmsweep's default for the mode
    qwen = get_curve("qwen3.5_mtp")
    assert qwen is not None
    assert plan_modes(["thinking_off"], references=[qwen])["thinking_off"].chat_template_kwargs == {
        "enable_thinking": False}
    assert plan_modes(["thinking_off"])["thinking_off"].chat_template_kwargs == {"enable_thinking": False}


def test_the_read_back_hint_for_a_curve_of_another_draft_head_names_that_head(tmp_path: Path) -> None:
    from llmsweep.alcollect.settings import CollectSettings
    from llmsweep.cli.alcollect import _read_back

    # a collected EAGLE3 curve of MiniMax-M3 for a draft head of its own, beside the packaged default one
    packaged = Path(__file__).resolve().parents[3] / "src" / "llmsweep" / "catalog" / "data" / "golden_al"
    text = (packaged / "minimaxm3_eagle3.yaml").read_text(encoding="utf-8")
    curve = tmp_path / "minimaxm3_eagle3_myhead.yaml"
    curve.write_text(text.replace("# key = ", "# draft_model: acme/m3-eagle3-heads\n# key = ", 1), encoding="utf-8")
    hint = _read_back(curve, CollectSettings(ks=(3,), thinking=("thinking_on",)))
    assert hint.startswith("read it back: llmsweep al minimaxm3 -m eagle3 -k 3 --thinking on") and \
        "--draft-model acme/m3-eagle3-heads" in hint, hint
