"""`serve`: how to start the engine, as data instead of a bash script.

InferenceX hides the server command in a per-recipe bash script, where a reviewer cannot see which flags apply to
which search-space arm and a dropped field goes unnoticed. Here a recipe states engine arguments, environment and
speculative decoding as typed data, with per-arm `overrides`; the engine adapter renders the exact command.
"""

from __future__ import annotations

import datetime
import difflib
import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from llmsweep import shell
from llmsweep.engine_ids import EngineId
from llmsweep.spec.components import RECIPE_SCENARIOS, StrictInput
from llmsweep.spec.rule_error import rule_error

ArgScalar = str | int | float | bool
ArgValue = ArgScalar | list[str | int | float] | dict[str, Any] | None
"""A flag's value: scalar → `--flag value`; `true` → bare `--flag`; `false`/`null` → flag omitted; a list →
`--flag v1 v2 …`; a mapping → `--flag '<compact JSON>'` (vLLM's `--speculative-config`, `--kv-transfer-config`)."""

EnvValue = str | int | float | None
"""Environment values are strings on the wire; numbers are accepted and stringified, `null` unsets."""

SpecMethod = Literal["eagle", "eagle3", "mtp", "draft_model", "dspark", "ngram", "medusa"]
Thinking = Literal["on", "off"]

WHEN_FIELDS: tuple[str, ...] = (
    "scenario",
    "isl",
    "osl",
    "tp",
    "pp",
    "ep",
    "dp-attn",
    "dcp-size",
    "pcp-size",
    "spec-decoding",
    "kv-offloading",
    "kv-offload-backend",
    "conc",
)
"""Search-space fields an override may match on (`kv-offload-backend` matches the backend name)."""

WHEN_CHOICES: dict[str, tuple[str, ...]] = {
    "scenario": tuple(s.value for s in RECIPE_SCENARIOS),
    "spec-decoding": ("mtp", "draft_model", "none"),
    "kv-offloading": ("none", "dram"),
}
"""Closed value sets: an override whose value is outside them could never match, so it is an error."""


ENV_NAME = shell.NAME
"""A shell variable name: what `export NAME=...`, `NAME=... cmd` and `docker run -e NAME` accept without quoting."""

FLAG_NAME = re.compile(r"(--[A-Za-z0-9][A-Za-z0-9_.-]*|-[A-Za-z][A-Za-z0-9]*)(=.*)?", re.DOTALL)
"""An engine flag: `--long-name` (dots for `--compilation-config.level`-style keys) or a short `-sc`, optionally
`=value` as argparse accepts it (the engine adapter splits the value off, and it is quoted wherever it is written)."""


NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
"""A word argparse reads as a value although it begins with `-` (its `_negative_number_matcher`): `-1`, `-0.5`."""


def _printable(text: str) -> str:
    """The name as a finding prints it: repr-escaped, so a newline or escape code in a hostile name stays visible."""
    return repr(text)[1:-1] if not text.isprintable() else text


def reads_as_flag(word: str) -> bool:
    """True when an engine's parser would take `word` for a flag, wherever it stands on the command line: it begins
    with `-` and is not a negative number. argparse (vLLM, SGLang, ATOM) and click (trtllm-serve) stop a flag's values
    and a positional argument at such a word and parse it as a flag of its own."""
    return word.startswith("-") and not NEGATIVE_NUMBER.fullmatch(word)


def check_argv_value(value: str, *, field: str | None = None, fix: str | None = None) -> str:
    """Raise the `schema.argv-value` rule error when `value`, which a launch writes as a word of the engine's command
    line (the model, a path, a flag's value), would be read there as a flag: `model-path: --trust-remote-code` would
    reach `vllm serve` as that flag, past every check on `serve.args`."""
    if reads_as_flag(value):
        raise rule_error(
            "argv-value",
            f"`{_printable(value)}` begins with `-`: it is written on the engine's command line as a word of its own, "
            "where the engine would read it as a flag, not as this value",
            field=field,
            fix=fix or "write the value without the leading `-` (a path as `./-name` or an absolute path); engine "
                       "flags go under `serve.args`",
        )
    return value


def _argv_words(value: ArgValue) -> list[str]:
    """The words `value` becomes on the command line (a mapping is one JSON word, which begins with `{`)."""
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _not_json(value: Any) -> Any:
    """The first value inside a flag's mapping that JSON cannot write (a YAML date, `!!binary`, `!!set`), or None."""
    if isinstance(value, dict):
        for item in value.values():
            if (bad := _not_json(item)) is not None:
                return bad
        return None
    if isinstance(value, list):
        for item in value:
            if (bad := _not_json(item)) is not None:
                return bad
        return None
    return None if value is None or isinstance(value, (str, int, float, bool)) else value


def _not_finite(value: Any) -> float | None:
    """The first `.nan` or `.inf` in a flag's value (a scalar, a list item, anywhere in a mapping), or None."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, (dict, list)):
            if (bad := _not_finite(item)) is not None:
                return bad
        elif isinstance(item, float) and not math.isfinite(item):
            return item
    return None


def _check_args(args: dict[str, ArgValue]) -> dict[str, ArgValue]:
    for flag, value in args.items():
        if (odd := _not_finite(value)) is not None:
            raise rule_error(
                "type",
                f"engine argument `{_printable(flag)}` holds `{odd}`, a number that is not finite: the engine would "
                "parse it and compute with it (a `nan` memory fraction), and a mapping holding it is no JSON",
                field=flag,
                fix=f"give `{_printable(flag)}` the finite number meant; a word the engine reads is written quoted "
                    "(`\"inf\"`)",
            )
        if value == []:
            raise rule_error(
                "type",
                f"engine argument `{_printable(flag)}` is an empty list: it would be written as the bare flag, which "
                "turns a switch on and leaves a flag that takes values without one",
                field=flag,
                fix=f"give `{_printable(flag)}` its values (`[a, b]`), `true` for the bare flag, or `null` to leave it "
                    "out",
            )
        if isinstance(value, dict) and (bad := _not_json(value)) is not None:
            kind = "an unquoted date" if isinstance(bad, datetime.date) else f"a YAML {type(bad).__name__}"
            raise rule_error(
                "type",
                f"engine argument `{_printable(flag)}` is a mapping, written on the command line as one JSON word, "
                f"and it holds {kind} (`{bad!r}`) that JSON cannot write",
                field=flag,
                fix="write that value as the string the engine should read, quoted (`\"2024-01-01\"`), without a "
                    "`!!` tag",
            )
    seen: dict[str, str] = {}
    for flag, value in args.items():
        name, inline, _ = flag.partition("=")
        if inline and value is not True:
            raise rule_error(
                "serve-flag",
                f"engine argument `{_printable(flag)}` gives its value in its name and again as `{value!r}`",
                field=flag,
                fix=f"write `{_printable(name)}: <value>` (or `{_printable(flag)}: true` for the value in the name)",
            )
        if name in seen:
            raise rule_error(
                "serve-flag",
                f"engine argument `{_printable(name)}` is given twice (`{_printable(seen[name])}` and "
                f"`{_printable(flag)}`); the engine would take one of them silently",
                field=flag,
                fix=f"keep one `{_printable(name)}`",
            )
        seen[name] = flag
    for flag in args:
        if not flag.startswith("-"):
            raise rule_error(
                "serve-flag",
                f"engine argument `{_printable(flag)}` is not a flag",
                field=flag,
                fix=f"write it as the engine spells it on the command line, e.g. `--{_printable(flag)}`",
            )
        if not FLAG_NAME.fullmatch(flag):
            raise rule_error(
                "serve-flag",
                f"engine argument `{_printable(flag)}` is not a valid flag name: flags are `--` then letters, digits, "
                "`_`, `.` or `-` (it is written into shell scripts and command lines)",
                field=flag,
                fix="spell the flag as the engine's --help does; put values under the flag, never in its name",
            )
    for flag, value in args.items():
        name, inline, written = flag.partition("=")
        for word in [written] if inline else _argv_words(value):
            check_argv_value(word, field=flag, fix=f"give `{_printable(name)}` a value that does not begin with `-` "
                                                   "(a path as `./-name`); a flag goes under `serve.args` as its own "
                                                   "key")
    return args


SECRET_FLAG = re.compile(r"((^|_)TOKEN$|_KEY$|^KEY$|SECRET$|PASSWORD$|PASSWD$|CREDENTIALS?$)")
"""Flag names (dashes as `_`, upper-cased) whose value is a credential: `--api-key`, `--hf-token`, `--token`."""
SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})")
"""Values that are credentials whatever flag carries them (Hugging Face, OpenAI-style, GitHub, AWS key ids)."""


def _check_secret_args(args: dict[str, ArgValue]) -> None:
    """A credential written as an engine argument would land in job.json, server_command.txt, the store and the
    report; it must come from the caller's environment (`secret-env`) instead."""
    for key, given in args.items():
        flag, inline, written = key.partition("=")  # `--api-key=sk-...: true` carries its value in its name
        value = written if inline else given
        if value is None or isinstance(value, bool):
            continue
        bare = flag.lstrip("-").replace("-", "_").replace(".", "_").upper()
        text = value if isinstance(value, str) else str(value)
        if SECRET_FLAG.search(bare) or SECRET_VALUE.search(text):
            raise rule_error(
                "secret-arg",
                f"engine argument `{_printable(key)}` carries a secret-looking value written in the recipe; it would "
                "be written to job.json, server_command.txt, the results store and the report",
                field=key,
                fix="delete the value; list the variable the engine reads it from (e.g. HF_TOKEN, VLLM_API_KEY) under "
                    "`serve.secret-env`, so it is taken from the caller's environment at launch and never written",
            )


def check_env_name(name: str, *, field: str | None = None) -> None:
    """Raise the `schema.env-name` rule error unless `name` is a valid shell variable name."""
    if not ENV_NAME.fullmatch(name):
        raise rule_error(
            "env-name",
            f"`{_printable(name)}` is not a valid environment variable name: names are a letter or `_`, then letters, "
            "digits or `_` (it is written into `export NAME=...` lines and the server's environment)",
            field=field if field is not None else name,
            fix="rename the variable to the engine's documented name, e.g. `NCCL_DEBUG`",
        )


def _secrets_unwritten(secret_env: list[str], env: dict[str, Any], where: str, field: str) -> None:
    """Refuse a variable listed in secret-env whose value `env` (the serve block's, an override's) writes."""
    for name in secret_env:
        if env.get(name) is not None:
            raise rule_error(
                "secret-in-env",
                f"`{name}` is listed in secret-env but its value is written in {where}",
                field=f"{field}.{name}",
                fix=f"delete `{name}` from {where}; it is read from the caller's environment at launch",
            )


def _stringify_env(env: dict[str, EnvValue]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, value in env.items():
        if isinstance(name, str):
            check_env_name(name)
        if isinstance(value, bool):
            raise rule_error(
                "type",
                f"environment variable `{name}` is a YAML boolean; engines read strings",
                field=name,
                fix=f'quote the value, e.g. `{name}: "1"` or `{name}: "true"`',
            )
        if isinstance(value, (datetime.date, datetime.datetime)):  # `2024-01-01` unquoted is a YAML timestamp
            raise rule_error(
                "type",
                f"environment variable `{name}` is a YAML date (an unquoted `{value}` reads as one); an "
                "environment variable is one string",
                field=name,
                fix=f'quote it: `{name}: "{value}"`',
            )
        if not (value is None or isinstance(value, (str, int, float))):
            kind = "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else type(value).__name__
            raise rule_error(
                "type",
                f"environment variable `{name}` is a YAML {kind}; an environment variable is one string (it was "
                "written as Python's text of it)",
                field=name,
                fix=f'write the string the engine reads, quoted, e.g. `{name}: "a,b"` or `{name}: \'{{"k": 1}}\'`',
            )
        out[name] = None if value is None else str(value)
    return out


class EngineOverride(StrictInput):
    """Explicit engine identity when the image tag cannot tell (custom builds, nightlies)."""

    name: EngineId | None = Field(
        default=None, description="Engine adapter to use instead of the one `framework` implies."
    )
    version: str | None = Field(default=None, min_length=1, description="Engine version, e.g. `0.5.16`.")


class SpecDecoding(StrictInput):
    """How the engine drafts tokens, and which golden acceptance length applies."""

    method: SpecMethod = Field(description="Draft method: eagle, eagle3, mtp, draft_model, dspark, ngram, medusa.")
    num_steps: int | None = Field(
        default=None,
        gt=0,
        alias="num-steps",
        description="Draft length K (SGLang speculative-num-steps, vLLM num_speculative_tokens); keys the golden AL.",
    )
    topk: int | None = Field(default=None, gt=0, description="Draft tree top-k (SGLang speculative-eagle-topk).")
    num_draft_tokens: int | None = Field(
        default=None, gt=0, alias="num-draft-tokens", description="Tokens verified per step (SGLang)."
    )
    draft_model: str | None = Field(
        default=None, alias="draft-model", description="Draft checkpoint (HF id or path) for eagle3/draft_model."
    )
    golden_curve: str | None = Field(
        default=None, alias="golden-curve",
        description="The golden curve to pin, by id or variant tag, where several curves measured the same drafter "
                    "(Kimi-K3's DSpark: the default and `probabilistic-block`); selects the curve only, never what "
                    "is launched. A curve of another drafter than `draft-model` is refused (golden-al.curve-drafter); "
                    "for a draft model at a local path it says which curve that drafter is.")
    thinking: Thinking = Field(default="on", description="Chat-template thinking mode the golden curve is read at.")
    acceptance_length: float | None = Field(
        default=None,
        ge=1.0,
        allow_inf_nan=False,
        alias="acceptance-length",
        description="Explicit synthetic acceptance length; the golden one is kept alongside for the policy check.",
    )
    acceptance_length_source: str | None = Field(
        default=None,
        min_length=1,
        alias="acceptance-length-source",
        description="Where `acceptance-length` was measured (a run URL, a report), for a model no golden curve covers: "
        "InferenceX asks such recipes to cite their AL source.",
    )

    @property
    def curve_selector(self) -> str | None:
        """What picks among a model family's golden curves: `golden-curve`, else the draft model."""
        return self.golden_curve or self.draft_model

    @property
    def curve_drafter(self) -> str | None:
        """The drafter the curve `golden-curve` selects must have measured: the launched `draft-model` (None where the
        draft model itself selects the curve, or none is named). A curve of another drafter pins no AL for it."""
        return self.draft_model if self.golden_curve else None

    @field_validator("draft_model", mode="after")
    @classmethod
    def _draft_not_a_flag(cls, value: str | None) -> str | None:
        return value if value is None else check_argv_value(value)

    @field_validator("thinking", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML 1.1 reads bare `on`/`off` as booleans.
        if value is True:
            return "on"
        if value is False:
            return "off"
        return value

    @model_validator(mode="after")
    def _source_cites_a_pin(self) -> SpecDecoding:
        if self.acceptance_length_source is not None and not self.acceptance_length_source.strip():
            raise rule_error(
                "missing",
                "`acceptance-length-source` is blank: it must say where the acceptance length was measured",
                field="acceptance-length-source",
                fix="write the run's URL or the report that measured it, or delete `acceptance-length-source`",
            )
        if self.acceptance_length_source is not None and self.acceptance_length is None:
            raise rule_error(
                "missing",
                "`acceptance-length-source` cites where an explicit acceptance length was measured, and none is given",
                field="acceptance-length",
                fix="add `acceptance-length: <AL>` (what the source measured) or delete `acceptance-length-source`",
            )
        return self

    @model_validator(mode="after")
    def _pin_within_k_plus_one(self) -> SpecDecoding:
        # A verify step keeps at most K drafts plus one bonus token: a pin above K + 1 is a slip no engine realises
        # (the simulator runs at K + 1; a real engine's read-back measures at most K + 1 and calls the run invalid,
        # after its GPU hours). Golden curves are held to 1 ≤ AL ≤ K + 1 the same way (catalog.golden).
        k = self.num_steps
        if self.acceptance_length is not None and k is not None and self.acceptance_length > k + 1:
            raise rule_error(
                "range",
                f"`acceptance-length: {self.acceptance_length:g}` is above K + 1 = {k + 1} for `num-steps: {k}`: a "
                "verify step accepts at most K draft tokens plus one",
                field="acceptance-length",
                fix=f"write the acceptance length measured at K={k} (1 ≤ AL ≤ {k + 1}), or the K it was measured at",
            )
        return self

    @property
    def draft_length(self) -> int | None:
        """K used to read the golden curve."""
        return self.num_steps


class ServeCore(StrictInput):
    """What an engine adapter needs to render a launch; `ResolvedServe` on a job is this after overrides."""

    args: dict[str, ArgValue] = Field(default_factory=dict, description="Engine flags: `--flag: value`.")
    env: dict[str, str | None] = Field(default_factory=dict, description="Server environment variables.")
    secret_env: list[str] = Field(
        default_factory=list,
        alias="secret-env",
        description="Names of variables taken from the caller's environment and never written to disk.",
    )
    spec_decoding: SpecDecoding | None = Field(
        default=None, alias="spec-decoding", description="Speculative decoding settings (method, K, thinking)."
    )
    engine: EngineOverride | None = Field(default=None, description="Engine name/version if the image cannot tell.")
    load_format: str | None = Field(
        default=None, alias="load-format", description="Weight loading, e.g. `dummy` for random weights."
    )
    model_path: str | None = Field(
        default=None, alias="model-path", description="Local weights directory served instead of downloading `model`."
    )
    client_image: str | None = Field(
        default=None,
        alias="client-image",
        description="Image to run the load client in (discouraged: policy checks its Python).",
    )
    client_python: str | None = Field(
        default=None, alias="client-python", description="Python version inside `client-image`, e.g. `3.11`."
    )
    port: int | None = Field(default=None, gt=0, lt=65536, description="Server port (default: chosen by executor).")
    health_timeout: int | None = Field(
        default=None, gt=0, alias="health-timeout", description="Seconds to wait for the server to become ready."
    )

    @field_validator("args", mode="after")
    @classmethod
    def _flags(cls, args: dict[str, ArgValue]) -> dict[str, ArgValue]:
        _check_secret_args(_check_args(args))
        return args

    @field_validator("model_path", "load_format", mode="after")
    @classmethod
    def _not_a_flag(cls, value: str | None) -> str | None:
        return value if value is None else check_argv_value(value)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, env: Any) -> Any:
        return _stringify_env(env) if isinstance(env, dict) else env

    @field_validator("secret_env", mode="after")
    @classmethod
    def _secret_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            check_env_name(name, field=f"[{index}]")
        return names

    @model_validator(mode="after")
    def _secrets_have_no_value(self) -> ServeCore:
        _secrets_unwritten(self.secret_env, self.env, "env", "env")
        return self


class Override(StrictInput):
    """Extra args/env applied only to search-space arms whose fields match `when`."""

    when: dict[str, Any] = Field(
        description="Search-space field → value (or list of values), e.g. `{kv-offloading: dram}`."
    )
    args: dict[str, ArgValue] = Field(default_factory=dict, description="Flags added or replaced (`null` removes).")
    env: dict[str, str | None] = Field(default_factory=dict, description="Variables added or replaced (`null` unsets).")

    @field_validator("when", mode="after")
    @classmethod
    def _known_fields(cls, when: dict[str, Any]) -> dict[str, Any]:
        if not when:
            raise rule_error(
                "override-when", "an override needs at least one `when` field", fix="add e.g. `kv-offloading: dram`"
            )
        for name in when:
            if name not in WHEN_FIELDS:
                close = difflib.get_close_matches(name, WHEN_FIELDS, n=1)
                hint = f"did you mean `{close[0]}`? " if close else ""
                raise rule_error(
                    "unknown-key",
                    f"`{name}` is not a search-space field an override can match on; {hint}"
                    f"known: {', '.join(WHEN_FIELDS)}",
                    field=name,
                    fix=f"rename it to `{close[0]}`" if close else "use one of the listed fields",
                )
            choices = WHEN_CHOICES.get(name)
            values = when[name] if isinstance(when[name], list) else [when[name]]
            bad = [v for v in values if choices is not None and v not in choices]
            if bad:
                raise rule_error(
                    "override-when",
                    f"`{name}: {bad[0]}` can never match: {name} is one of {', '.join(choices or ())}",
                    field=name,
                    fix=f"use one of {', '.join(choices or ())}",
                )
        return when

    @field_validator("args", mode="after")
    @classmethod
    def _flags(cls, args: dict[str, ArgValue]) -> dict[str, ArgValue]:
        _check_secret_args(_check_args(args))
        return args

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, env: Any) -> Any:
        return _stringify_env(env) if isinstance(env, dict) else env

    def matches(self, arm: dict[str, Any]) -> bool:
        """True when every `when` field equals the arm's value (a list means any of). A boolean equals only a boolean:
        Python's `True == 1` would match `when: {tp: true}` to a tp-1 arm and `when: {dp-attn: 0}` to dp-attn false,
        where the recipe coerces no type."""
        for name, expected in self.when.items():
            actual = arm.get(name)
            options = expected if isinstance(expected, list) else [expected]
            if not any(actual == o and isinstance(actual, bool) == isinstance(o, bool) for o in options):
                return False
        return True


class Serve(ServeCore):
    """The `serve` block of a recipe: base settings plus per-arm overrides."""

    overrides: list[Override] = Field(default_factory=list, description="Arm-specific args/env, applied in order.")

    @model_validator(mode="after")
    def _spec_needs_k(self) -> Serve:
        sd = self.spec_decoding
        if sd is not None and sd.method in ("eagle", "eagle3", "mtp", "dspark", "draft_model") and sd.num_steps is None:
            raise rule_error(
                "missing",
                f"spec-decoding method `{sd.method}` needs `num-steps` (the draft length K)",
                field="spec-decoding",
                fix="add `num-steps: <K>` under `serve.spec-decoding`",
            )
        return self

    @model_validator(mode="after")
    def _overrides_keep_secrets_out(self) -> Serve:
        """A variable listed in secret-env has no value in an override's env either (it was refused only when the arm
        resolved, as a traceback)."""
        for index, override in enumerate(self.overrides):
            _secrets_unwritten(self.secret_env, override.env, f"override {index}'s env", f"overrides[{index}].env")
        return self

    def resolve(self, arm: dict[str, Any]) -> ResolvedServe:
        """Apply every matching override in order; later ones win: an override's flag replaces the flag however it
        was spelled before (`--x: 8` by `--x=16: true`, and the other way round). `null` values remove a flag or
        variable."""
        args = dict(self.args)
        env = dict(self.env)
        applied: list[int] = []
        for index, override in enumerate(self.overrides):
            if override.matches(arm):
                named = {flag.partition("=")[0] for flag in override.args}
                args = {flag: value for flag, value in args.items() if flag.partition("=")[0] not in named}
                args.update(override.args)
                env.update(override.env)
                applied.append(index)
        data = self.model_dump(by_alias=True, exclude={"overrides"})
        data["args"] = {k: v for k, v in args.items() if v is not None and v is not False}
        data["env"] = {k: v for k, v in env.items() if v is not None}
        data["applied-overrides"] = applied
        return ResolvedServe.model_validate(data)


class ResolvedServe(ServeCore):
    """`serve` after the arm's overrides: no `null`/`false` flags, no unset variables; records the overrides applied."""

    applied_overrides: list[int] = Field(
        default_factory=list, alias="applied-overrides", description="Indexes of the overrides that matched."
    )
