"""Where catalog data comes from: the packaged YAML files, then the user's catalog directories, in that order.

Catalogs are data a user must be able to extend without code (a new GPU, a private model, a newly found engine
incompatibility). Each catalog file holds one top-level section mapping entry ids to entries; a user file with the
same name adds entries, and an entry with an id that already exists replaces the packaged one as a whole (no deep
merge, so what a user writes is exactly what is used) — save `power.yaml`, whose entry is laid over the one below it a
group of figures (a figure with its source) at a time (`catalog.power`). A file that does not read raises a
`CatalogError` naming file, line and field, which `validate` lists as a finding (`policy.inputs`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import BaseModel, ValidationError

from llmsweep.errors import CatalogError, ConfigError, undecodable_line
from llmsweep.words import noun

ENV_VAR = "LLMSWEEP_CATALOG_DIR"
PACKAGED_DIR = Path(__file__).resolve().parent / "data"

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])


def user_dirs(*, to_write: bool = False) -> tuple[Path, ...]:
    """User catalog directories: ``$LLMSWEEP_CATALOG_DIR`` (pathsep list), else ``~/.config/llmsweep/catalog``.

    A folder the variable names that does not exist, or a file, is refused (it had been skipped without a word, so a
    typo read no user catalog at all); `to_write` (where `sim calibrate --save` writes) lets a missing one be made."""
    raw = os.environ.get(ENV_VAR)
    if raw:
        dirs = tuple(Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip())
        for d in dirs:
            if d.exists() and not d.is_dir():
                raise ConfigError(f"${ENV_VAR} names {d}, which is a file, not a catalog folder",
                                  fix=f"point ${ENV_VAR} at folders of catalog files ({os.pathsep}-separated), or "
                                      "unset it")
            if not d.exists() and not to_write:
                raise ConfigError(f"${ENV_VAR} names {d}, which does not exist",
                                  fix=f"create the folder, correct the path in ${ENV_VAR}, or unset it")
        return dirs
    default = default_user_dir()
    return (default,) if default.is_dir() else ()


def default_user_dir() -> Path:
    """The user catalog directory read when ``$LLMSWEEP_CATALOG_DIR`` is unset (if it exists)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or "~/.config").expanduser() / "llmsweep" / "catalog"


def catalog_dirs() -> tuple[Path, ...]:
    """Packaged data first, then user directories; later directories win."""
    return (PACKAGED_DIR, *user_dirs())


def layered_files(name: str, dirs: Iterable[Path] | None = None) -> list[Path]:
    """Every existing ``<dir>/<name>`` in catalog order."""
    return [d / name for d in (dirs if dirs is not None else catalog_dirs()) if (d / name).is_file()]


def load_yaml(path: Path) -> Any:
    """Parse one YAML file; a syntax error names file:line and how to find the mistake."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read catalog file: {exc}", file=path, fix="check the path and permissions") from exc
    except UnicodeDecodeError as exc:  # (a binary file, a curve saved in another encoding): named, not a traceback
        raise CatalogError(f"catalog file is not UTF-8 text ({exc.reason})", file=path, line=undecodable_line(exc),
                           fix="save the file as UTF-8") from exc
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        if isinstance(exc, _DuplicateKey):  # always marked: the second key's start
            raise CatalogError(str(exc.problem), file=path, line=line,
                               column=mark.column + 1 if mark is not None else None,
                               fix="keep one of the two: a catalog file states each entry once (YAML would silently "
                                   "keep the later one)") from exc
        raise CatalogError(
            f"catalog file is not valid YAML ({getattr(exc, 'problem', exc)})", file=path, line=line,
            fix="fix the YAML syntax at that line (indentation, quoting, a missing colon)",
        ) from exc


class _DuplicateKey(yaml.constructor.ConstructorError):
    """A key written twice in one mapping of a catalog file."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (C where built), refusing a key written twice in one mapping: PyYAML keeps the later one in
    silence (a curve's `2: 1.56` then `2: 2.90` read as 2.90; a user's hardware entry given twice, its first lost).
    A key written over one a merge key (`<<`) brought in is an override, not a duplicate."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # By key, never by line: a flow mapping (`{1: 1.77, 2: 2.28, 2: 2.90}`) writes both on one line.
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base constructor refuses it
                continue
            if first is not key_node:
                at = first.start_mark
                raise _DuplicateKey(None, None, f"`{key}` is given twice in one mapping (first at line {at.line + 1}, "
                                                f"column {at.column + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


def key_lines(path: Path, section: str) -> dict[str, int]:
    """1-based line of every key under ``section`` in a YAML file, for error messages (one parse per file)."""
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, yaml.YAMLError):
        return {}
    node = _child(root, section) if section else root
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _ in node.value}


def line_of(path: Path, keys: Sequence[str]) -> int | None:
    """1-based line of the deepest key of the path `keys` (mapping keys from the file's root) found in a YAML file, for
    an error about a field nested inside an entry; None when not even the first is there."""
    try:
        node: yaml.Node | None = yaml.compose(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in keys:
        found = _key_node(node, key)
        if found is None:
            break
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    found = _key_node(node, key)
    return found[1] if found is not None else None


def _key_node(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        pairs: list[tuple[yaml.Node, yaml.Node]] = node.value
        for k, v in pairs:
            if str(k.value) == key:
                return k, v
    return None


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a catalog entry was defined, so errors and `llmsweep catalog` can point at it."""

    path: Path
    line: int | None

    @property
    def packaged(self) -> bool:
        return PACKAGED_DIR in self.path.parents

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else str(self.path)


def load_section(
    name: str, section: str, dirs: tuple[Path, ...], sections: frozenset[str] | None = None
) -> dict[str, tuple[dict[str, Any], Origin]]:
    """Merge ``section`` of every layered ``name`` file: id -> (raw entry, origin). Later files replace entries.

    ``sections`` lists every top-level key the file may hold (default: just ``section``), for files such as
    engines.yaml that keep two related sections side by side.
    """
    allowed = sections or frozenset({section})
    merged: dict[str, tuple[dict[str, Any], Origin]] = {}
    for path in layered_files(name, dirs):
        data = load_yaml(path)
        if data is None:
            continue
        if not isinstance(data, dict) or not isinstance(data.get(section, {}), dict):
            raise CatalogError(
                f"catalog file must be a mapping with a '{section}:' mapping of id -> entry", file=path,
                fix=f"start the file with '{section}:' and indent one entry per id below it",
            )
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise CatalogError(
                f"unknown top-level {noun(len(unknown), 'key')} {unknown} in catalog file {name}", file=path,
                line=min((n for k in unknown if (n := line_of(path, [str(k)]))), default=None),
                fix=f"put entries under one of: {', '.join(sorted(allowed))}",
            )
        lines = key_lines(path, section)
        for key, entry in (data.get(section) or {}).items():
            line = lines.get(str(key))
            if not isinstance(entry, dict):
                raise CatalogError(
                    f"{section}.{key} must be a mapping of fields", file=path, line=line, field=f"{section}.{key}",
                    fix="write the entry's fields indented below its id",
                )
            merged[str(key)] = (entry, Origin(path, line))
    return merged


def build_models(
    name: str,
    section: str,
    model: type[M],
    dirs: tuple[Path, ...],
    inject: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    sections: frozenset[str] | None = None,
) -> dict[str, tuple[M, Origin]]:
    """Validate each merged entry into ``model``; an invalid entry names file:line, the field and the fix."""
    out: dict[str, tuple[M, Origin]] = {}
    for key, (raw, origin) in load_section(name, section, dirs, sections).items():
        data = inject(key, dict(raw)) if inject else raw
        try:
            out[key] = (model.model_validate(data), origin)
        except ValidationError as exc:
            raise invalid_entry(name, section, key, origin, exc, model) from exc
    return out


def invalid_entry(name: str, section: str, key: str, origin: Origin, exc: ValidationError, model: type[BaseModel],
                  fix: str | None = None) -> CatalogError:
    """The error of an entry `model` refuses: every field it names with pydantic's reason, at the entry's file:line (the
    finding's field: the first one named), and `fix` (default: the fields of the model)."""
    errors = exc.errors()
    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<entry>'}: {err['msg']}" for err in errors)
    first = [str(p) for p in errors[0]["loc"]] if errors else []
    return CatalogError(
        f"invalid {section} entry '{key}' in {name}: {problems}", file=origin.path, line=origin.line,
        field=".".join([section, key, *first]),
        fix=fix or f"correct the named fields; the fields of a {model.__name__} are: {', '.join(model.model_fields)}",
    )


def clear_caches() -> None:
    """Forget every loaded catalog (after a user file changed in a long-lived process)."""
    for fn in _CACHED:
        fn.cache_clear()


_CACHED: list[functools._lru_cache_wrapper[Any]] = []


def cached(fn: F) -> F:
    """functools.cache that ``clear_caches`` can reset; catalog loaders key their cache on the directory tuple."""
    wrapped = functools.cache(fn)
    _CACHED.append(wrapped)
    return cast(F, wrapped)  # same call signature; functools types the wrapper's arguments as Hashable


def entry_fix(file: str, spec: type[BaseModel], key: str) -> str:
    """How to add what a catalog lacks: an entry in the user catalog file `file` (it adds to the packaged one, and
    replaces a packaged entry of the same id), keyed as `key` says, with every field `spec` requires (the packaged
    file shows each filled in). The one text for models and hardware alike."""
    required = [name for name, f in spec.model_fields.items() if f.is_required() and name != "id"]
    return (f"add an entry to {file} in ${ENV_VAR} (else {default_user_dir()}), {key}, with "
            f"{', '.join(required)} "
            f"(the packaged {PACKAGED_DIR / file} shows each)")
