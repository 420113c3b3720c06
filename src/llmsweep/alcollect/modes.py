"""Per thinking mode: how a collection samples, which chat-template kwargs it sends, and whether the served model has
a thinking switch at all (`llmsweep al collect`'s defaults).

A golden curve states its sampling per thinking mode (Qwen3.5: temperature 0.6, top_p 0.95, top_k 20 thinking on;
0.7, 0.8, 20 and presence penalty 1.5 off), and a collected curve stands in for it only when sampled as it states
for the mode (`catalog.golden.sampling_differences`). So each mode's sampling is, key by key, the first of: the
mode's own option (``--sampling on=temperature=0.6``), the option for every mode (``--temperature``), what the curve
being completed (``--merge-into``) states for the mode, what the model family's reference curve states for it
(`catalog.golden.reference_curve`); then, where one of those curves speaks for the mode, nothing: a key the curve
leaves unstated is not sent (DSv4's curve states only temperature 1.0: top_p and top_k are the server's, as in
InferenceX's collection), else :class:`Sampling`'s default. Chat-template kwargs likewise: the option, a curve's
stated kwargs for the mode, :data:`DEFAULT_KWARGS`.

A thinking-on cell of a model whose chat template has no thinking switch would be the thinking-off cell under another
label: :func:`thinking_switch` reads the template (the model directory, a `--chat-template` serve arg, the local
Hugging Face cache) and renders one prompt with each mode's kwargs; where no template is at hand, a measured golden
curve holding thinking-on cells sent with the same kwargs says the switch exists.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.alcollect.settings import DEFAULT_KWARGS, Sampling
from llmsweep.catalog.golden import GoldenCurve, ThinkingMode, stated_sampling
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job

log = logging.getLogger(__name__)

MODES: tuple[ThinkingMode, ...] = ("thinking_off", "thinking_on")
DEFAULT_ORIGIN = "llmsweep's default"


class ModeSettings(BaseModel):
    """One thinking mode's sampling and kwargs, and where each came from (said before the collection starts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ThinkingMode
    sampling: Sampling
    origins: dict[str, str] = Field(description="Sampling key -> where its value came from.")
    chat_template_kwargs: dict[str, Any]
    kwargs_origin: str

    def describe(self) -> str:
        """``thinking_on: temperature 0.6, top_p 0.95, top_k 20, presence_penalty 0 (temperature, top_p, top_k,
        presence_penalty as qwen3.5_mtp states them for thinking_on); chat_template_kwargs {...} (...)``; the keys not
        sent are named with why: ``thinking_on: temperature 1 (temperature as dsv4_mtp states them for thinking_on);
        not sent: top_p, top_k, presence_penalty (unstated by dsv4_mtp for thinking_on: the server's default); …``."""
        values = self.sampling.model_dump()
        sent: dict[str, list[str]] = {}
        unsent: dict[str, list[str]] = {}
        for key, origin in self.origins.items():
            (sent if values[key] is not None else unsent).setdefault(origin, []).append(key)
        numbers = ", ".join(f"{k} {v:g}" for k, v in values.items() if v is not None)
        whence = "; ".join(f"{', '.join(keys)} {origin}" for origin, keys in sent.items())
        parts = [f"{numbers} ({whence})"] if sent else []
        parts += [f"not sent: {', '.join(keys)} ({origin})" for origin, keys in unsent.items()]
        return (f"{self.mode}: {'; '.join(parts)}; chat_template_kwargs "
                f"{json.dumps(self.chat_template_kwargs, sort_keys=True)} ({self.kwargs_origin})")


def speaks_for(curve: GoldenCurve, mode: str) -> bool:
    """The curve holds `mode`'s cells or states a line for it: what it says of the mode's sampling is its own."""
    return mode in curve.values or mode in curve.sampling


def _stated_kwargs(curve: GoldenCurve, mode: str) -> dict[str, Any] | None:
    line = curve.sampling.get(mode)
    return dict(line.chat_template_kwargs) if line is not None and "chat_template_kwargs" in line.raw else None


def plan_modes(modes: Sequence[ThinkingMode], *, references: Sequence[GoldenCurve] = (),
               every_mode: dict[str, Any] | None = None, per_mode: dict[ThinkingMode, dict[str, Any]] | None = None,
               every_mode_origin: dict[str, str] | None = None,
               kwargs: dict[ThinkingMode, dict[str, Any]] | None = None) -> dict[ThinkingMode, ModeSettings]:
    """Each mode's :class:`ModeSettings`. `references`: the curves whose statements default a mode, first winning
    (the curve `--merge-into` completes, then the family's reference curve); `every_mode`: sampling keys given for
    all modes (`every_mode_origin` names the option of each); `per_mode`: keys given for one mode; `kwargs`:
    chat-template kwargs given per mode. A key no one gives is not sent where a reference curve speaks for the mode
    (it leaves the key to the server, as InferenceX's collector does, and a collection sampled otherwise would not
    stand in for it), else it is :class:`Sampling`'s default."""
    out: dict[ThinkingMode, ModeSettings] = {}
    for mode in modes:
        speaking = [c for c in references if speaks_for(c, mode)]
        if speaking:
            values: dict[str, Any] = dict.fromkeys(Sampling.model_fields)
            silent = ", ".join(c.id for c in speaking)
            origins = dict.fromkeys(values, f"unstated by {silent} for {mode}: the server's default")
        else:
            values = Sampling().model_dump()
            origins = dict.fromkeys(values, DEFAULT_ORIGIN)
        for curve in reversed(speaking):
            for key, value in stated_sampling(curve, mode).items():
                values[key], origins[key] = value, f"as {curve.id} states them for {mode}"
        for key, value in (every_mode or {}).items():
            values[key], origins[key] = value, (every_mode_origin or {}).get(key, "given for every mode")
        for key, value in ((per_mode or {}).get(mode) or {}).items():
            values[key], origins[key] = value, f"given for {mode.removeprefix('thinking_')}"
        given = (kwargs or {}).get(mode)
        stated = next(((c.id, k) for c in references if speaks_for(c, mode)
                       and (k := _stated_kwargs(c, mode)) is not None), None)
        # a curve that states kwargs for another mode but none for this one sent none for it (InferenceX's DSv4
        # collection passes them for thinking on only): the template's default, as the keys a curve leaves unstated
        silent_kwargs = next((c.id for c in speaking if any(_stated_kwargs(c, other) is not None
                                                              for other in MODES if other != mode)), None)
        if given is not None:
            template_kwargs, kwargs_origin = given, "given"
        elif stated is not None:
            template_kwargs, kwargs_origin = stated[1], f"as {stated[0]} states them for {mode}"
        elif silent_kwargs is not None:
            template_kwargs = {}
            kwargs_origin = f"none: {silent_kwargs} states none for {mode} (the template's default)"
        else:
            template_kwargs, kwargs_origin = dict(DEFAULT_KWARGS[mode]), DEFAULT_ORIGIN
        try:
            sampling = Sampling.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(f"{key} {values[key]} ({origins[key]}): {e['msg']}" for e in exc.errors()
                                 for key in e["loc"][:1] if isinstance(key, str) and key in values)
            raise ConfigError(f"the sampling of {mode} is not valid: {problems}",
                              fix="temperature >= 0, 0 < top_p <= 1, top_k >= -1, -2 <= presence_penalty <= 2") \
                from None
        out[mode] = ModeSettings(mode=mode, sampling=sampling,
                                 origins={k: origins[k] for k in values}, chat_template_kwargs=template_kwargs,
                                 kwargs_origin=kwargs_origin)
    return out


# --------------------------------------------------------------------------------------------- the thinking switch


class ThinkingSwitch(BaseModel):
    """Whether thinking on asks the served model for something else than thinking off, and how that is known."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    present: bool | None = Field(description="True: on and off differ; False: they render the same prompt (a "
                                 "thinking-on cell would be the thinking-off one); None: not known here.")
    why: str


def _template_arg(job: Job) -> tuple[str | None, str] | None:
    """The template a `--chat-template` serve arg gives (it replaces the model's), and where it was read: the text
    itself where the arg is inline (vLLM takes a Jinja template as well as a path), else the file it names; a path not
    readable here (one inside the engine's container) gives no text, and the model's own template does not stand in
    for it. None where no such arg is served."""
    from llmsweep.engines.base import norm_flag, split_flag

    for flag, value in (job.serve.args.items() if job.serve is not None else ()):
        name, value = split_flag(flag, value)
        if norm_flag(name) != "--chat-template" or not isinstance(value, str):
            continue
        if "{%" in value or "{{" in value:
            return value, "the inline --chat-template serve arg"
        try:
            return Path(value).expanduser().read_text(encoding="utf-8"), f"--chat-template {value}"
        except (OSError, UnicodeDecodeError):
            return None, f"--chat-template {value} is not readable here"
    return None


def _hub_cache_dir(repo: str) -> Path | None:
    """The local Hugging Face cache's snapshot of `repo` holding its chat template, without asking the hub."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ModuleNotFoundError:
        return None
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        try:
            found = try_to_load_from_cache(repo, name)
        except Exception:  # an id that is no repo name (a path that does not exist)
            return None
        if isinstance(found, str):
            return Path(found).parent
    return None


def chat_template(job: Job) -> tuple[str | None, str]:
    """The chat template the served model renders requests with, and where it was read (or looked for)."""
    from llmsweep.engines.sglang import model_path
    from llmsweep.workload.tokenizer import chat_template_from

    arg = _template_arg(job)
    if arg is not None:
        return arg
    path = model_path(job)
    folder = Path(path).expanduser()
    if folder.is_dir():
        return chat_template_from(folder), f"the model directory {folder}"
    cached = _hub_cache_dir(path) if "/" in path and not path.startswith((".", "/", "~")) else None
    if cached is not None:
        return chat_template_from(cached), f"the Hugging Face cache's {path}"
    return None, f"{path} is no model directory here, and the Hugging Face cache holds no template of it"


def _render(template: str, kwargs: dict[str, Any]) -> str:
    from datetime import datetime

    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals.update(raise_exception=raise_exception,
                       strftime_now=lambda fmt: datetime.now().strftime(fmt))
    return env.from_string(template).render(messages=[{"role": "user", "content": "Write a sorting function."}],
                                            add_generation_prompt=True, bos_token="", eos_token="", **kwargs)


def _template_verdict(template: str, where: str, on: dict[str, Any], off: dict[str, Any]) -> ThinkingSwitch:
    keys = sorted({*on, *off})
    named = [k for k in keys if re.search(rf"\b{re.escape(k)}\b", template)]
    if not named:
        return ThinkingSwitch(present=False, why=f"the chat template ({where}) reads none of "
                              f"{', '.join(keys) or 'the chat_template_kwargs'}: thinking on renders the prompt "
                              "thinking off does")
    try:
        same = _render(template, on) == _render(template, off)
    except Exception as exc:  # a template this renderer cannot run (filters of the engine's own): trust the names
        log.debug("chat template not rendered: %s", exc)
        return ThinkingSwitch(present=True, why=f"the chat template ({where}) reads {', '.join(named)} (not "
                              f"rendered here: {type(exc).__name__})")
    if same:
        return ThinkingSwitch(present=False, why=f"the chat template ({where}) renders the same prompt with "
                              f"thinking on ({_json(on)}) as off ({_json(off)})")
    return ThinkingSwitch(present=True, why=f"the chat template ({where}) renders another prompt with thinking on "
                          f"({_json(on)}) than off ({_json(off)})")


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True)


def thinking_switch(job: Job, on: dict[str, Any], off: dict[str, Any],
                    references: Sequence[GoldenCurve] = ()) -> ThinkingSwitch:
    """Whether the served model thinks otherwise with `on`'s chat-template kwargs than with `off`'s: its chat template
    rendered with each; without a template here, a measured (not simulated) curve of `references` holding thinking-on
    cells sent with `on` says yes (unless a `--chat-template` serve arg replaces the model's template); else
    unknown."""
    template, where = chat_template(job)
    if template:
        return _template_verdict(template, where, on, off)
    if _template_arg(job) is not None:  # the served template is another than the one a golden curve was measured with
        return ThinkingSwitch(present=None, why=f"no chat template to check ({where})")
    for curve in references:
        if not curve.simulated and "thinking_on" in curve.values and _stated_kwargs(curve, "thinking_on") == on:
            return ThinkingSwitch(present=True, why=f"{curve.id} holds thinking-on cells measured with "
                                  f"chat_template_kwargs {_json(on)} (no chat template here: {where})")
    return ThinkingSwitch(present=None, why=f"no chat template to check ({where}), and no measured golden curve of "
                          f"the model holds thinking-on cells sent with {_json(on)}")
