"""Turn pydantic validation errors into findings a person can act on.

pydantic reports a location tuple (with union tags mixed in), an error type and a terse message. A user needs the
file:line, the field path as written, what is wrong in recipe terms, a suggestion for a misspelt key, and the fix.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from llmsweep.findings import Finding, Severity
from llmsweep.spec.source import FieldPath, SourceMap, parse_path, render_path

_RANGE_TYPES = {
    "greater_than": "schema.range",
    "greater_than_equal": "schema.range",
    "less_than": "schema.range",
    "less_than_equal": "schema.range",
    "too_short": "schema.range",
    "too_long": "schema.range",
    "string_too_short": "schema.range",
}


def findings_from_validation_error(
    exc: ValidationError, model: type[BaseModel], data: Any, prefix: FieldPath, source: SourceMap
) -> list[Finding]:
    """One finding per distinct problem; union branches failing at the same field collapse into one."""
    by_path: dict[FieldPath, list[ErrorDetails]] = {}
    keys: list[Finding] = []
    keyed: set[FieldPath] = set()
    for err in exc.errors(include_url=False):
        # a mapping key of the wrong type (a dict field's, or a model's own): pydantic's loc holds its str/int form
        if err["loc"][-1:] == ("[key]",) or err["type"] == "invalid_key":
            parent = _clean_loc(err["loc"][:-2] if err["type"] != "invalid_key" else err["loc"][:-1], data,
                                missing=False)
            keys.append(key_finding(parent, err["input"], prefix, source))
            keyed.add(parent)
            continue
        path = _clean_loc(err["loc"], data, missing=err["type"] == "missing")
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("field"), str):
            path = (*path, *parse_path(ctx["field"]))
        by_path.setdefault(path, []).append(err)
    findings = keys
    for path, errs in by_path.items():
        if path in keyed:  # the other branches of a union refusing the same mapping: its key is the finding
            continue
        findings.append(_finding(path, errs, model, data, prefix, source))
    return findings


def key_finding(parent: FieldPath, key: Any, prefix: FieldPath, source: SourceMap) -> Finding:
    """A key YAML read as another type than a string (`true:`, `on:`, `~:`, `5:` under `serve.env`, or as a recipe
    key at the top of the file): named as it is written, at its own line (the source map keeps such a key as its text,
    an integer key as the integer)."""
    full = (*prefix, *parent)
    written: str | int | None = None
    for path in source.lines:
        if len(path) == len(full) + 1 and path[:-1] == full:
            text = path[-1]
            try:  # a sibling written as a plain `true`/`on`/`~`/`1.5` is the key: read it as YAML read it
                value = yaml.safe_load(text) if isinstance(text, str) and len(text) <= 16 else text
            except yaml.YAMLError:
                continue
            if type(value) is type(key) and value == key:
                written = text
                break
    shown = "" if written is None else str(written)
    whose = f"key `{shown}` of `{_name_of(parent)}`" if full else f"recipe key `{shown}`"
    return Finding(
        rule="schema.type", severity=Severity.ERROR, file=source.file,
        line=source.line_of((*full, written)) if written is not None else source.line_of(full),
        path=(render_path(full) + (f".{shown}" if shown else "")) if full else (shown or None),
        message=f"{whose} is read by YAML as {_type_name(key)} ({key!r}), not as a string",
        fix=f'quote the key: `"{shown}": ...`',
    )


def _clean_loc(loc: tuple[Any, ...], data: Any, *, missing: bool = True) -> FieldPath:
    """Keep the loc parts that index into the data; drop pydantic's union/function tags. `missing`: the error names a
    missing field, whose name (the last part, not in the data) is kept; otherwise a last part the data lacks is a
    union branch's tag (`str`, `dict[str,any]`), not a field."""
    out: list[str | int] = []
    current = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_dict or in_list:
            out.append(part)
            current = current[part]
        elif missing and last and isinstance(part, (str, int)) and isinstance(current, dict):
            out.append(part)  # a missing field: name it
    return tuple(out)


def _finding(
    path: FieldPath,
    errs: list[ErrorDetails],
    model: type[BaseModel],
    data: Any,
    prefix: FieldPath,
    source: SourceMap,
) -> Finding:
    full = (*prefix, *path)
    line = source.line_of(full)
    rule, message, fix = _describe(path, errs, model, data)
    return Finding(
        rule=rule,
        severity=Severity.ERROR,
        file=source.file,
        line=line,
        path=render_path(full),
        message=message,
        fix=fix,
    )


def _describe(path: FieldPath, errs: list[ErrorDetails], model: type[BaseModel], data: Any) -> tuple[str, str, str]:
    custom = [e for e in errs if str(e["type"]).startswith("llmsweep.")]
    if custom:
        err = custom[0]
        ctx = err.get("ctx") or {}
        rule = "schema." + str(err["type"]).removeprefix("llmsweep.")
        return rule, str(err["msg"]), str(ctx.get("fix") or "see the message")
    err = errs[0]
    kind = str(err["type"])
    name = _name_of(path)
    if kind == "extra_forbidden":
        known = _known_keys(model, path[:-1])
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        allowed = f"{' ' if close else '. '}Known keys here: {', '.join(sorted(known))}." if known else ""
        fix = f"rename it to `{close[0]}`" if close else "delete it or move it where it belongs"
        return "schema.unknown-key", f"unknown key `{name}`{hint}{allowed}", fix
    if kind == "missing":
        return "schema.missing", f"missing required field `{name}`", f"add `{name}:`"
    if kind in ("literal_error", "enum"):
        expected = (err.get("ctx") or {}).get("expected", "")
        got = err.get("input")
        options = [o.strip(" '") for o in str(expected).replace(" or ", ",").split(",") if o.strip()]
        close = difflib.get_close_matches(str(got), options, n=1) if isinstance(got, str) else []
        hint = f"; did you mean `{close[0]}`?" if close else ""
        if name == "spec-decoding" and got in ("eagle", "eagle3", "dspark", "medusa", "ngram"):
            return (
                "schema.enum",
                f"`spec-decoding` is {got!r}; search-space entries spell every draft method as `mtp` (InferenceX)",
                f"write `spec-decoding: mtp` and put `method: {got}` under `serve.spec-decoding`",
            )
        return (
            "schema.enum",
            f"`{name}` is {got!r}, which is not allowed; expected {expected}{hint}",
            f"use one of: {expected}",
        )
    if kind in _RANGE_TYPES:
        return "schema.range", f"`{name}`: {err['msg']} (got {err.get('input')!r})", "use a value in the allowed range"
    if len(errs) > 1:
        expected = sorted({_expected_of(e) for e in errs})
        got = errs[0].get("input")
        return (
            "schema.type",
            f"`{name}` has the wrong type: got {_type_name(got)} {got!r}, expected {' or '.join(expected)}",
            "write a value of the expected type",
        )
    got = err.get("input")
    if kind in ("bool_type", "bool_parsing") and path and isinstance(path[-1], str):
        # `"false"` and `0` are not false: no field coerces, and a quoted word is a string
        said = "null" if got is None else f"{_type_name(got)} {got!r}"
        return ("schema.type", f"`{name}`: expected true or false, got {said}",
                f"write `{name}: true` or `{name}: false` (a boolean, unquoted)")
    if kind == "string_type" and isinstance(got, (int, float)) and not isinstance(got, bool) and path \
            and isinstance(path[-1], str):
        # an unquoted version or commit of digits (`0.26` aside, `5e91234` is a float: inf) that YAML read as a number
        return ("schema.type", f"`{name}`: {err['msg']} (got {_type_name(got)} {got!r}: YAML read the unquoted value "
                               "as a number)",
                f"write it in quotes (`{name}: \"…\"`): unquoted, digits — or digits with an `e` and more digits, as "
                "the commit 5e91234 — are a number")
    if kind.endswith("_type") or kind.endswith("_parsing") or kind in ("model_attributes_type", "is_instance_of"):
        # a list item is named by its list and index, and the fix quotes the value to change, not the index
        what = f"`{got}` (`{name}`)" if path and isinstance(path[-1], int) and isinstance(got, (str, int, float)) \
            else f"`{name}`"
        return (
            "schema.type",
            f"`{name}`: {err['msg']} (got {_type_name(got)} {got!r})",
            f"write {what} as {_expected_of(err)}",
        )
    return "schema.invalid", f"`{name}`: {err['msg']}", "correct the value"


def _name_of(path: FieldPath) -> str:
    """The field a finding is about: its key, or for a list item its list and index (`conc-list[1]`)."""
    if not path:
        return "recipe"
    if isinstance(path[-1], int):
        items = [f"[{p}]" for p in path]
        i = len(path) - 1
        while i > 0 and isinstance(path[i - 1], int):
            i -= 1
        head = str(path[i - 1]) if i > 0 else ""
        return head + "".join(items[i:])
    return str(path[-1])


def _expected_of(err: ErrorDetails) -> str:
    kind = str(err["type"])
    names = {
        "int_type": "an integer",
        "int_parsing": "an integer",
        "int_from_float": "an integer",
        "float_type": "a number",
        "float_parsing": "a number",
        "bool_type": "a boolean",
        "bool_parsing": "a boolean",
        "string_type": "a string",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
        "model_attributes_type": "a mapping",
    }
    return names.get(kind, kind.replace("_", " "))


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _known_keys(model: type[BaseModel], path: FieldPath) -> list[str]:
    """YAML keys accepted at `path` (relative to the recipe), found by walking the model's field annotations."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            current = _unwrap_item(current)
            continue
        cls = _model_of(current)
        if cls is None:
            return []
        field_info = next((f for n, f in cls.model_fields.items() if (f.alias or n) == part), None)
        if field_info is None:
            return []
        current = field_info.annotation
    cls = _model_of(current)
    if cls is None:
        return []
    return [f.alias or n for n, f in cls.model_fields.items()]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def _unwrap_item(annotation: Any) -> Any:
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in get_args(annotation):
            if get_origin(arg) is list:
                return get_args(arg)[0]
        return annotation
    if origin is list:
        return get_args(annotation)[0]
    return annotation
