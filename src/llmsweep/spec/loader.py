"""Load recipe files into typed recipes and findings that point at file:line.

Every problem becomes a :class:`~llmsweep.findings.Finding` instead of an exception, so one run reports all of them
(a user fixing a recipe wants the whole list, not the first error). Recipes that fail validation are left out of
`recipes`; the rest can still be planned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmsweep.discover_files import DISCOVERY_FILE, PATCH_FILE, PROPOSED_FILE
from llmsweep.engine_ids import ENGINE_IDS, unresolved_reason
from llmsweep.errors import ConfigError, undecodable_line
from llmsweep.findings import Finding, Severity, has_errors
from llmsweep.option_spellings import flag
from llmsweep.spec.engines import resolve_engine
from llmsweep.spec.recipe import MultiNodeRecipe, Recipe, SchemaChoice, SingleNodeRecipe
from llmsweep.spec.source import (
    MERGE_KEY,
    SourceMap,
    YamlDocument,
    YamlLimitError,
    YamlSyntaxError,
    load_yaml,
    parse_yaml,
    render_path,
)
from llmsweep.spec.validation_findings import findings_from_validation_error, key_finding
from llmsweep.words import count_of, noun

_RUNNER_CONFIG = flag("runner_config")


@dataclass
class LoadResult:
    """Recipes that validated, keyed by recipe key in file order, and every finding about the input."""

    recipes: dict[str, Recipe] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    sources: dict[str, SourceMap] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No error findings (warnings allowed)."""
        return not has_errors(self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def raise_on_error(self) -> LoadResult:
        """Raise :class:`ConfigError` carrying the findings when any is an error."""
        if not self.ok:
            errors = self.errors
            lines = "\n".join(f.render() for f in errors)
            # a file that is not there or cannot be read has its own fix (`_missing`): no line to edit
            edit = any(f.rule != "schema.file" for f in errors)
            raise ConfigError(
                f"{count_of(len(errors), 'recipe problem')}:\n{lines}",
                fix="edit the named lines; `llmsweep validate` lists every finding" if edit else None,
                findings=self.findings,
            )
        return self


RECIPE_SUFFIXES = (".yaml", ".yml")
"""A recipe file's suffixes (what a folder of recipes is read for)."""


def recipe_files(paths: Iterable[Path]) -> list[Path]:
    """Expand directories to their `*.yaml`/`*.yml` files (sorted), those of a discovery folder below them left out
    (:func:`discovery_folders`); keep files as given."""
    return _expand(paths)[0]


def _expand(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """:func:`recipe_files`, and the discovery folders the walk left out, in the order met."""
    out: list[Path] = []
    left_out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        for file in sorted(p for p in path.rglob("*") if p.suffix in RECIPE_SUFFIXES and p.is_file()):
            if (folder := _discovery_folder(file, path)) is None:
                out.append(file)
            elif folder not in left_out:
                left_out.append(folder)
    return out, left_out


def _discovery_folder(file: Path, top: Path) -> Path | None:
    """The folder between `top` (not `top` itself: a discovery folder named as the argument is read) and `file` that
    is a discovery's output (`llmsweep discover --out`: it holds discovery.json); None when none is."""
    for parent in file.parents:
        if parent == top:
            return None
        if (parent / DISCOVERY_FILE).is_file():
            return parent
    return None


def load_recipes(paths: list[Path]) -> LoadResult:
    """Read recipe files (or directories of them) into recipes plus findings; never raises for bad content. A folder's
    walk leaves out the discovery folders below it, each said once (`schema.not-recipe`): what `llmsweep discover`
    wrote there — its proposal, under the recipe's own keys, which replaces the recipe it came from, and its stage
    recipes — is not a second copy of the folder's recipes (`examples/` holds the recipe and its discovery's
    evidence: a duplicate recipe)."""
    result = LoadResult()
    seen_in: dict[str, str] = {}
    files, left_out = _expand([Path(p) for p in paths])
    for folder in left_out:
        result.findings.append(
            Finding(rule="schema.not-recipe", severity=Severity.WARNING, file=str(folder), line=None,
                    message=f"not a folder of recipes: the output of `llmsweep discover` (it holds {DISCOVERY_FILE}), "
                            f"whose {PROPOSED_FILE} and stage recipes repeat the discovered recipe's keys; skipped",
                    fix=f"to validate or run the proposal, name its file ({folder / PROPOSED_FILE}), or apply "
                        f"{folder / PATCH_FILE} to the recipe")
        )
    for path in files:
        _load_file(path, result, seen_in)
    return result


def _error(rule: str, file: str, line: int | None, path: str | None, message: str, fix: str) -> Finding:
    return Finding(rule=rule, severity=Severity.ERROR, file=file, line=line, path=path, message=message, fix=fix)


def loads_recipes(text: str, file: str = "<string>") -> LoadResult:
    """Like :func:`load_recipes` for YAML text (tests, generated recipes); `file` names it in findings."""
    result = LoadResult()
    _load_text(lambda: parse_yaml(text, file), file, result, {})
    return result


def _load_file(path: Path, result: LoadResult, seen_in: dict[str, str]) -> None:
    """One recipe file: a regular file, or anything else that reads as text (`/dev/null`, a pipe such as
    `<(cat r.yaml)` or `/dev/stdin`, a FIFO), as `cat` would read it."""
    file = str(path)
    if not path.exists():
        result.findings.append(_missing(path))
        return
    _load_text(lambda: load_yaml(path), file, result, seen_in)


def _missing(path: Path) -> Finding:
    """A recipe argument that names nothing: said so, with the name that is there where one is close (`x.yml` for
    `x.yaml`, a spelling of the folder's files or folders), and a fix that fits what is there."""
    file = str(path)
    message = f"Input file '{file}' does not exist"
    if (near := _near_name(path)) is not None:
        return _error("schema.file", file, None, None, f"{message}; did you mean '{near}'?", f"pass {near}")
    folder = next((p for p in reversed(path.parents) if not p.is_dir()), None)
    if folder is not None:
        return _error("schema.file", file, None, None, f"{message}: there is no folder {folder}", "check the path")
    here = path.parent
    names = _yaml_names(here)
    held = (f"{here if str(here) != '.' else 'the working directory'} holds "
            + (f"{count_of(len(names), 'YAML file')}: {', '.join(names[:5])}{', …' if len(names) > 5 else ''}"
               if names else "no YAML file"))
    return _error("schema.file", file, None, None, message, f"check the path: {held}")


def _yaml_names(folder: Path) -> list[str]:
    """The names of the recipe-suffixed files in `folder` (not below it), sorted; none when it cannot be listed."""
    try:
        return sorted(p.name for p in folder.iterdir() if p.suffix in RECIPE_SUFFIXES and p.is_file())
    except OSError:
        return []


def _near_name(path: Path) -> Path | None:
    """The path that is there where `path` is not, each missing part of it read as the other recipe suffix
    (`.yml` for `.yaml`) or the closest spelling (difflib) of what its folder holds — a folder for a part
    before the last, a recipe file or folder for the last —; None when a part has no close name, or `path` is
    there."""
    import difflib

    parts = path.parts[1:] if path.is_absolute() else path.parts
    found = Path(path.anchor) if path.is_absolute() else Path()
    mended = False
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if (found / part).exists() and (last or (found / part).is_dir()):
            found = found / part
            continue
        stem, suffix = Path(part).stem, Path(part).suffix
        others = [stem + s for s in RECIPE_SUFFIXES if s != suffix] if last and suffix in RECIPE_SUFFIXES else []
        same_stem = [name for name in others if (found / name).is_file()]
        try:
            entries = [e for e in found.iterdir() if e.is_dir() or (last and e.suffix in RECIPE_SUFFIXES)]
        except OSError:
            return None
        close = same_stem or difflib.get_close_matches(part, sorted(e.name for e in entries), n=1, cutoff=0.75)
        if not close:
            return None
        found, mended = found / close[0], True
    return found if mended and found.exists() else None


def _load_text(read: Callable[[], YamlDocument], file: str, result: LoadResult, seen_in: dict[str, str]) -> None:
    try:
        doc = read()
    except OSError as exc:  # a folder was expanded already; this is a file that exists and cannot be read
        result.findings.append(
            _error("schema.file", file, None, None, f"Input file '{file}' cannot be read: {exc.strerror or exc}",
                   "check the path and its permissions")
        )
        return
    except YamlLimitError as exc:
        result.findings.append(
            _error("schema.yaml-limits", file, exc.line, None, f"YAML refused: {exc.problem}",
                   exc.fix or "write the recipe out plainly: a recipe nests about 10 levels and needs few aliases")
        )
        return
    except YamlSyntaxError as exc:
        result.findings.append(
            _error("schema.yaml-syntax", file, exc.line, None, f"YAML syntax error: {exc.problem}",
                   exc.fix or "fix the YAML at that line (indentation, a missing `:` or an unclosed bracket)")
        )
        return
    except UnicodeDecodeError as exc:
        raw = exc.object if isinstance(exc.object, bytes) else b""
        line = undecodable_line(exc)
        bad = raw[exc.start:exc.end].hex(" ") if raw else "?"
        result.findings.append(
            _error("schema.yaml-syntax", file, line, None, f"not UTF-8 text: {noun(exc.end - exc.start, 'byte')} {bad} "
                                                           f"({exc.reason})",
                   "save the file as UTF-8 (that line holds text in another encoding, e.g. Latin-1)")
        )
        return
    if isinstance(doc.data, dict) and (other := not_recipes(doc.data)) is not None:
        what, fix = other
        result.findings.append(
            Finding(rule="schema.not-recipe", severity=Severity.WARNING, file=file, line=None,
                    message=f"not a recipe file: {what}; skipped", fix=fix)
        )
        return
    source = doc.source
    result.sources[file] = source
    for dup in doc.duplicates:
        if dup.path[-1] == MERGE_KEY:
            message = (f"merge key `<<` is written twice in one mapping (first at line {dup.first_line}); "
                       "YAML keys are unique, and which merge wins would depend on the YAML library")
            fix = "merge several mappings with one key, `<<: [*first, *second]` (earlier ones win)"
        else:
            message = (f"key `{dup.path[-1]}` is written twice in one mapping (first at line {dup.first_line}); "
                       "YAML would silently keep only the last")
            fix = ("delete or rename one of them (to change a value a `<<: *anchor` merge brought in, write the key "
                   "once beside the `<<`)")
        result.findings.append(_error("schema.duplicate-key", file, dup.line, render_path(dup.path), message, fix))
    data = doc.data
    if data is None:
        result.findings.append(
            Finding(rule="schema.empty-file", severity=Severity.WARNING, file=file, line=1,
                    message="file holds no recipes", fix="add a recipe key or delete the file")
        )
        return
    if not isinstance(data, dict):
        result.findings.append(
            _error("schema.not-mapping", file, 1, None,
                   f"Config file '{file}' must contain a dictionary (recipe key → recipe), got {type(data).__name__}",
                   "start the file with `<recipe-key>:` and indent the recipe under it")
        )
        return
    for key, value in data.items():
        _load_recipe(key, value, file, source, result, seen_in)


def not_recipes(data: dict[Any, Any]) -> tuple[str, str] | None:
    """What a YAML file's top-level mapping is, and where it goes, when it is clearly no recipes: a runner file
    (only the fleet's top-level keys, `labels:` mapping labels to node lists; `--runner-config` takes it) or a golden
    acceptance-length curve (one checkpoint key over thinking modes, as `llmsweep al collect` writes it). None for
    anything else: it is read as recipes, and a mistake in it said as a recipe's. The one answer to "is this file a
    recipe" for every command that reads recipe arguments (a folder of them holds a fleet file beside its recipes:
    `examples/gpu/`); the shapes are read from the fleet's and the curves' models."""
    from typing import get_args

    from llmsweep.catalog.fleet import FleetCatalog
    from llmsweep.catalog.golden import CURVES_ENV_VAR, ThinkingMode

    fleet_keys = {f.alias or name for name, f in FleetCatalog.model_fields.items() if not f.exclude}
    labels = data.get("labels")
    if set(data) <= fleet_keys and isinstance(labels, dict) and not any(isinstance(v, dict) for v in labels.values()):
        return (f"a runner file (top-level {', '.join(f'`{k}:`' for k in sorted(fleet_keys & set(data)))})",
                f"pass it with {_RUNNER_CONFIG}, not as a recipe")
    curve = next(iter(data.values())) if len(data) == 1 else None
    if isinstance(curve, dict) and curve and set(curve) <= set(get_args(ThinkingMode)):
        return ("a golden acceptance-length curve (one checkpoint over thinking modes, as `llmsweep al collect` "
                "writes it)", f"the planner reads curves from the folders ${CURVES_ENV_VAR} names, not as a recipe")
    return None


def _env_as_written(key: str, value: dict[str, Any], source: SourceMap) -> dict[str, Any]:
    """The recipe with each environment value (`serve.env`, an override's env) that YAML read as a number taken as
    written: a variable is text, and `C: 1.10` meant `1.10`, not the number's `1.1` (nor `+5`'s `5`)."""
    serve = value.get("serve")
    if not isinstance(serve, dict):
        return value
    written = {path[2:]: text for path, text in source.numbers.items() if path[:2] == (key, "serve")}
    if not written:
        return value

    def env(block: dict[str, Any], at: tuple[Any, ...]) -> dict[str, Any]:
        names = block.get("env")
        if not isinstance(names, dict):
            return block
        fixed = {n: written.get((*at, "env", n), v) for n, v in names.items()}
        return {**block, "env": fixed}

    serve = env(serve, ())
    overrides = serve.get("overrides")
    if isinstance(overrides, list):
        serve = {**serve, "overrides": [env(o, ("overrides", i)) if isinstance(o, dict) else o
                                        for i, o in enumerate(overrides)]}
    return {**value, "serve": serve}


def _load_recipe(
    key: Any, value: Any, file: str, source: SourceMap, result: LoadResult, seen_in: dict[str, str]
) -> None:
    if not isinstance(key, str):  # `ON:`, `~:`, `5:`: named as written, at its own line, as a nested key is
        result.findings.append(key_finding((), key, (), source))
        return
    line = source.line_of((key,))
    if not key.strip():  # `"":` or `" ":`: a recipe no job id, --config-keys pattern or message can name
        result.findings.append(
            _error("schema.blank-key", file, line, None,  # (the key as a path would read as none)
                   f"recipe key {key!r} is {'empty' if not key else 'only whitespace'}: a recipe is named by its key "
                   "(its jobs' ids, --config-keys, every message about it)",
                   "name the recipe: write a key such as `qwen3-fp8-vllm` before its fields")
        )
        return
    if "*" in key:
        result.findings.append(
            _error("schema.wildcard-key", file, line, key,
                   f"Wildcard '*' is not allowed in master config keys: '{key}'",
                   "rename the key without `*` (reserved for changelog and --config-keys patterns)")
        )
        return
    if key in seen_in:
        if seen_in[key] != file:
            result.findings.append(
                _error("schema.duplicate-recipe", file, line, key,
                       f"Duplicate configuration keys found in '{file}': {key} (also in '{seen_in[key]}')",
                       "recipe keys are global: rename one of them")
            )
        return
    seen_in[key] = file
    if not isinstance(value, dict):
        result.findings.append(
            _error("schema.not-mapping", file, line, key,
                   f"recipe `{key}` must be a mapping of fields, got {type(value).__name__}",
                   "indent the recipe's fields (image, model, ...) under the key")
        )
        return
    if nul := _nul_findings({key: value}, (), file, source):
        result.findings.extend(nul)
        return
    value = _env_as_written(key, value, source)
    if "multinode" in value:  # missing, it is reported by the single-node schema beside the recipe's other findings
        try:
            SchemaChoice.model_validate(value)
        except ValidationError as exc:
            result.findings.extend(findings_from_validation_error(exc, SchemaChoice, value, (key,), source))
            return
    cls: type[Recipe] = MultiNodeRecipe if value.get("multinode") is True else SingleNodeRecipe
    try:
        recipe = cls.model_validate(value)
    except ValidationError as exc:
        result.findings.extend(findings_from_validation_error(exc, cls, value, (key,), source))
        return
    recipe.bind(key, source)
    result.recipes[key] = recipe
    _runnable_warnings(recipe, file, line, result)


def _nul_findings(value: Any, path: tuple[str | int, ...], file: str, source: SourceMap) -> list[Finding]:
    """A NUL character (a `"\\0"` escape) in any key or value of a recipe: no command line, environment variable or
    file name can carry one. `run` stopped on it at launch (`ValueError: embedded null byte`) and a rendered script
    set the value cut short at it, after `validate` had passed the recipe."""
    found: list[Finding] = []
    items: list[tuple[Any, Any]] = (list(value.items()) if isinstance(value, dict)
                                    else list(enumerate(value)) if isinstance(value, list) else [])
    for part, item in items:
        where = (*path, part if isinstance(part, (str, int)) else str(part))
        for text in (part, item):
            if isinstance(text, str) and "\0" in text:
                found.append(_error(
                    "schema.nul", file, source.line_of(where), render_path(where),
                    f"{'key' if text is part else 'value'} {text!r} holds a NUL character (`\\0`): no command line, "
                    "environment variable or file name can carry one",
                    "delete the `\\0` escape from the quoted string"))
        found.extend(_nul_findings(item, where, file, source))
    return found


def _runnable_warnings(recipe: Recipe, file: str, line: int | None, result: LoadResult) -> None:
    if recipe.serve is None:
        result.findings.append(
            Finding(rule="spec.not-runnable", severity=Severity.WARNING, file=file, line=line, path=recipe.key,
                    message="no `serve` block: the recipe plans (matrix, predict, run --simulate on the simulator's "
                            "defaults) but no real engine can be launched from it",
                    fix="add `serve: {args: {...}, env: {...}}` with the engine launch settings")
        )
    elif resolve_engine(recipe) is None:
        result.findings.append(
            Finding(rule="spec.unknown-engine", severity=Severity.WARNING, file=file,
                    line=recipe.line_of(("framework",)), path=recipe.path_of(("framework",)),
                    message=f"{unresolved_reason(recipe.framework)}; the recipe cannot be run",
                    fix=f"name the engine with `serve.engine.name` ({', '.join(ENGINE_IDS)})")
        )

