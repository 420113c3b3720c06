"""YAML with a memory of where every field was written.

PyYAML's composed node tree carries a start mark for every key and value. We keep a map from field path
(`('my-key', 'scenarios', 'agentic-coding', 0, 'search-space', 1, 'tp')`) to its 1-based line, so any rule — schema
or policy — can point a user at the exact line to edit instead of at "somewhere in this file".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FieldPath = tuple[str | int, ...]

MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences a recipe file may have (recipes need about 10; PyYAML's composer
recurses per level, so a deeper file would end in a RecursionError)."""
MAX_ALIASES = 1_000
"""Most `*alias` references one file may use."""
MAX_NODES = 1_000_000
"""Most YAML nodes a file may expand to once every alias is followed: a 700-byte "billion laughs" alias bomb
expands to 10⁹ and would take minutes and gigabytes before failing; real master files are a few thousand nodes."""
MAX_BYTES = 16 * 2**20
"""Largest recipe file read (16 MiB; InferenceX's master files are a few hundred KiB): what is larger is no recipe —
`/dev/zero`, a disk, a log named *.yaml — and was read whole into memory (`validate /dev/zero` until MemoryError, a
68 MB file 31 s) before anything was said."""
SIZE_FIX = "pass the recipe file itself (a recipe file is text of a few KiB; this one is something else)"


def render_path(path: Iterable[str | int]) -> str:
    """`('k', 'scenarios', 'agentic-coding', 0, 'tp')` → `k.scenarios.agentic-coding[0].tp`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def parse_path(text: str) -> FieldPath:
    """Inverse of :func:`render_path` for keys without dots or brackets (recipe keys may hold dots: see below).

    Recipe keys such as `qwen3.5-fp8-...` contain dots, so parsing is done against known keys by
    :meth:`SourceMap.line_of`, which accepts either form; this helper splits naively and is only used as a fallback.
    """
    parts: list[str | int] = []
    for chunk in text.split("."):
        while "[" in chunk:
            head, _, rest = chunk.partition("[")
            index, closed, tail = rest.partition("]")
            if not (closed and index.isdigit()):
                break  # not an index (a hostile key such as `A[x`): the rest is part of the key
            if head:
                parts.append(head)
            parts.append(int(index))
            chunk = tail
        if chunk:
            parts.append(chunk)
    return tuple(parts)


@dataclass
class SourceMap:
    """Where each field of one YAML document was written. Lines are 1-based."""

    file: str
    lines: dict[FieldPath, int] = field(default_factory=dict)
    numbers: dict[FieldPath, str] = field(default_factory=dict)
    """Plain scalars read as numbers whose text as written differs from the number's own (`1.10` is 1.1, `+5` is 5,
    `1_000` is 1000): what was written, for a field whose value is text (an environment variable)."""

    def line_of(self, path: FieldPath | str) -> int | None:
        """Line of `path`, or of its nearest written ancestor (a missing field points at its parent mapping)."""
        key = self._as_tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return None

    def sub(self, prefix: FieldPath) -> SourceMap:
        """The part of this map under `prefix`, keeping full paths (used to give each recipe its own map)."""
        n = len(prefix)
        return SourceMap(self.file, {p: ln for p, ln in self.lines.items() if p[:n] == prefix},
                         {p: t for p, t in self.numbers.items() if p[:n] == prefix})

    def _as_tuple(self, path: FieldPath | str) -> FieldPath:
        if isinstance(path, tuple):
            return path
        # Recipe keys may contain dots: match the longest known top-level key first.
        tops = sorted((p[0] for p in self.lines if len(p) == 1 and isinstance(p[0], str)), key=len, reverse=True)
        for top in tops:
            if path == top:
                return (top,)
            if path.startswith(top + ".") or path.startswith(top + "["):
                rest = path[len(top) :].lstrip(".")
                return (top, *parse_path(rest)) if rest else (top,)
        return parse_path(path)


MERGE_KEY = "<<"
"""The YAML 1.1 merge key: `<<: *anchor` copies the anchored mapping's keys in, under the mapping's own."""


@dataclass(frozen=True)
class DuplicateKey:
    """A key written twice in one mapping (PyYAML would silently keep the last one), or two merge keys (`<<`) in
    one mapping. A key written over one that a merge key brought in is an override, never a duplicate."""

    path: FieldPath
    line: int
    first_line: int


@dataclass
class YamlDocument:
    """Parsed data plus its source map and any duplicate keys found while composing."""

    data: Any
    source: SourceMap
    duplicates: list[DuplicateKey]


class YamlSyntaxError(Exception):
    """The file is not valid YAML; carries the 1-based line of the problem, and the fix when the problem says which
    (a tag, a tab: :func:`syntax_fix`), else None (the reader's generic fix)."""

    def __init__(self, file: str, line: int | None, problem: str, fix: str | None = None) -> None:
        super().__init__(f"{file}:{line}: {problem}" if line else f"{file}: {problem}")
        self.file = file
        self.line = line
        self.problem = problem
        self.fix = fix


TAG_FIX = "remove the tag: recipes are plain YAML (no `!` tags)"
TAB_FIX = "indent with spaces, not tabs (YAML allows no tab there)"
ALIAS_FIX = ("define the anchor before its use, in the same file (`key: &name value` above `*name`), or check the "
             "alias's spelling")
KEY_FIX = "write the key as a plain word or quoted string: a list or mapping (`? [a, b]`, `{a: 1}:`) is no key"
MERGE_FIX = "merge a mapping: `<<: *anchor` naming an anchored mapping, or `<<: [*a, *b]` (a list of them)"


def syntax_fix(exc: yaml.MarkedYAMLError) -> str | None:
    """The fix of a YAML error whose cause is plain from PyYAML's problem: a `!tag` the safe loader has no
    constructor for (`!!python/object/apply:…`, `!foo`), a tab where YAML wants spaces, an alias to no anchor, a list
    or mapping as a key, a `<<` merge of something other than mappings. None for the rest."""
    problem = exc.problem or ""
    if isinstance(exc, yaml.constructor.ConstructorError) and "could not determine a constructor" in problem:
        return TAG_FIX
    if "'\\t'" in problem or "tab character" in problem:
        return TAB_FIX
    if "found undefined alias" in problem:
        return ALIAS_FIX
    if "found unhashable key" in problem:
        return KEY_FIX
    if "to merge, but found" in problem:
        return MERGE_FIX
    return None


class YamlLimitError(YamlSyntaxError):
    """Valid YAML beyond what a recipe file may be: nested deeper than :data:`MAX_DEPTH`, or expanding (through
    aliases) past :data:`MAX_ALIASES` references or :data:`MAX_NODES` nodes."""


def load_yaml(path: Path) -> YamlDocument:
    """Read one YAML file, returning the data and where each field was written."""
    with path.open("rb") as f:  # at most one byte past the limit: a stream without end is not read to its end
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise YamlLimitError(str(path), None, f"the file is larger than {MAX_BYTES // 2**20} MiB", SIZE_FIX)
    return parse_yaml(raw.decode("utf-8"), str(path))


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting and alias expansion beyond the module limits while composing, before
    any Python object is built.

    Numbers are read as written (YAML 1.2's decimal forms): YAML 1.1's octal `010` (8), sexagesimal `4:16` (256)
    and hex/binary integers would silently become other numbers, so such a plain scalar stays the text it is, and a
    numeric field then refuses it with its file and line."""

    yaml_implicit_resolvers = {  # noqa: RUF012 - a copy of PyYAML's table, this class's alone
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str, file: str) -> None:
        super().__init__(stream)
        self._file = file
        self._depth = 0
        self._aliases = 0

    def _limit(self, problem: str) -> YamlLimitError:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        return YamlLimitError(self._file, event.start_mark.line + 1, problem)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._limit(f"more than {MAX_ALIASES} aliases (`*name`) in one file")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._limit(f"nesting deeper than {MAX_DEPTH} levels of mappings and lists")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Apply YAML merge keys (`<<: *anchor`, `<<: [*a, *b]`) the way the merge-key spec says: the mapping's own
        keys win over merged ones, and an earlier mapping of a `<<` list wins over a later one. (PyYAML 6.0.4's own
        flattening lets a later list entry win for most keys.)"""
        own, merged = _merge(node)
        for key_node, _ in own:
            if key_node.tag == "tag:yaml.org,2002:value":  # PyYAML's reading of a bare `=` key, kept
                key_node.tag = "tag:yaml.org,2002:str"
        node.value = merged + own  # construction keeps the last of equal keys: an own key overrides a merged one


_BoundedLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$"), list("-+0123456789"))
_BoundedLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))

MERGE_TAG = "tag:yaml.org,2002:merge"
"""The tag PyYAML resolves a plain `<<` key to: a YAML 1.1 merge key."""

_Pair = tuple[yaml.Node, yaml.Node]


def _key_id(node: yaml.Node) -> Any:
    return _scalar_key(node) if isinstance(node, yaml.ScalarNode) else ("<node>", id(node))


def _merge(node: yaml.MappingNode) -> tuple[list[_Pair], list[_Pair]]:
    """A mapping's own pairs (every one written, duplicates included) and the pairs its merge keys bring in.

    Merged pairs are those of each `<<` source in order (a list's earlier mappings first), each source with its own
    merges applied, keeping the first pair of each key and none whose key the mapping writes itself: YAML's merge
    key (yaml.org/type/merge.html). A source that is not a mapping is refused with its line.
    """
    own = [(k, v) for k, v in node.value if k.tag != MERGE_TAG]
    taken = {_key_id(k) for k, _ in own}
    merged: list[_Pair] = []
    for key_node, value_node in node.value:
        if key_node.tag != MERGE_TAG:
            continue
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise yaml.constructor.ConstructorError(
                    "while merging into a mapping (`<<`)", node.start_mark,
                    f"expected a mapping or a list of mappings to merge, but found {source.id}", source.start_mark)
            for pair in _resolved(source):
                if (key := _key_id(pair[0])) not in taken:
                    taken.add(key)
                    merged.append(pair)
    return own, merged


def _resolved(node: yaml.MappingNode) -> list[_Pair]:
    """A mapping's pairs as its value holds them: one per key, the last of a key written twice, merges applied."""
    own, merged = _merge(node)
    last: dict[Any, _Pair] = {}
    for pair in own:
        last.pop(_key_id(pair[0]), None)
        last[_key_id(pair[0])] = pair
    return merged + list(last.values())


def _expanded_size(root: yaml.Node) -> int:
    """Nodes the document has once aliases are followed (a shared node counts once per reference), stopping just
    past :data:`MAX_NODES`; iterative with memoisation, so an alias bomb is measured in microseconds."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not done:
            if id(node) in visiting:
                return MAX_NODES + 1  # a recursive alias (`&a [*a]`): infinitely large once followed
            visiting.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1
        for child in children:
            total += sizes.get(id(child), 1)
            if total > MAX_NODES:
                return total
        sizes[id(node)] = total
        visiting.discard(id(node))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


BOM = "\ufeff"
BOM_PROBLEM = ("an invisible byte-order mark (U+FEFF) stands inside the file, not at its start (files concatenated, "
               "each saved with a BOM?): YAML reads it as part of the key or value there, e.g. a recipe key that "
               "looks like another but matches no `--config-keys`")
BOM_FIX = ("delete the mark at that line (`grep -n $'\\xEF\\xBB\\xBF' FILE` finds it; an editor may show it as "
           "<feff>), and save files without a BOM")


C0_NAMES = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "TAB", "LF", "VT", "FF", "CR", "SO", "SI",
            "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US")
"""The ASCII control characters' names, by code point (what `man ascii` calls them)."""


def control_character(character: object) -> tuple[str, str]:
    """(problem, fix) for a raw character YAML does not allow in a file (the reader's `character`: its code point),
    named as the user can find it: `ESC (U+001B, shown as ^[ by cat -v)`. A NUL is deleted, as a `"\\0"` escape is
    refused (`schema.nul`: no command line, environment variable or file name can carry one); any other is deleted or,
    where a value needs it, written as an escape in a double-quoted string, which the reader allows."""
    code = character if isinstance(character, int) else ord(character) if isinstance(character, str) else -1
    name = C0_NAMES[code] if 0 <= code < len(C0_NAMES) else "DEL" if code == 0x7F else None
    caret = f"^{chr(code + 64)}" if 0 <= code < len(C0_NAMES) else "^?" if code == 0x7F else None
    said = f"{name} (U+{code:04X}, shown as {caret} by `cat -v`)" if name and caret else f"U+{code:04X}"
    kind = "control character" if code < 0x20 or 0x7F <= code <= 0x9F else "character"
    problem = f"the file holds a raw {kind}, {said}, which YAML does not allow in a file"
    if code == 0:
        return problem, ("delete the NUL at that line: no command line, environment variable or file name can carry "
                         "one (a `\"\\0\"` escape is refused too)")
    escape = f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    return problem, (f"delete the {name or f'U+{code:04X}'} at that line, or, where the value needs it, write it as "
                     f"an escape in a double-quoted string (`\"{escape}\"`)")


def parse_yaml(text: str, file: str) -> YamlDocument:
    """Parse YAML text; raise :class:`YamlSyntaxError` naming file:line on malformed input, or on a file that nests
    deeper than :data:`MAX_DEPTH` or expands past :data:`MAX_NODES` nodes through aliases."""
    if (bom := text.find(BOM, 1)) != -1:  # one at the start is the file's own, and YAML skips it
        raise YamlSyntaxError(file, text.count("\n", 0, bom) + 1, BOM_PROBLEM, BOM_FIX)
    try:
        loader = _BoundedLoader(text, file)
    except yaml.reader.ReaderError as exc:  # a control character: the reader refuses the text before any parsing
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else None
        problem, fix = control_character(exc.character)
        raise YamlSyntaxError(file, line, problem, fix) from exc
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node) > MAX_NODES:
            raise YamlLimitError(file, node.start_mark.line + 1,
                                  f"the document expands to more than {MAX_NODES} nodes through aliases (`*name`): "
                                  "an alias bomb, or a file far larger than any recipe")
        source = SourceMap(file)
        duplicates: list[DuplicateKey] = []
        if node is not None:  # before construction, which rewrites mappings that use merge keys
            _walk(node, (), source.lines, duplicates, set(), source.numbers)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        started, at = exc.context_mark, exc.problem_mark
        if started is not None and at is not None and started.line != at.line:
            problem += f" (the construct started at line {started.line + 1})"
        raise YamlSyntaxError(file, line, problem, syntax_fix(exc)) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(file, None, str(exc)) from exc
    finally:
        loader.dispose()
    return YamlDocument(data, source, duplicates)


def _walk(node: yaml.Node, path: FieldPath, lines: dict[FieldPath, int], dups: list[DuplicateKey],
          checked: set[int], numbers: dict[FieldPath, str]) -> None:
    """Record the line of every field under `path`, every key written twice in one mapping, and the text of every
    number whose own spelling differs from it (`SourceMap.numbers`).

    A merged field (`<<: *anchor`) points at the line where the anchored mapping wrote it. A key the mapping writes
    over a merged one is an override, not a duplicate; a key written twice by the mapping itself, or two `<<` keys
    in one mapping, is. A mapping reached again through an alias is checked for duplicates once.
    """
    if isinstance(node, yaml.MappingNode):
        own, merged = _merge(node)
        if id(node) not in checked:
            checked.add(id(node))
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = MERGE_KEY if key_node.tag == MERGE_TAG else _scalar_key(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    dups.append(DuplicateKey((*path, key), line, seen[key]))
                seen[key] = line
        for key_node, value_node in merged + own:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            child = (*path, _scalar_key(key_node))
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines, dups, checked, numbers)
    elif isinstance(node, yaml.ScalarNode):
        if (written := _respelled(node)) is not None:
            numbers[path] = written
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, dups, checked, numbers)


def _respelled(node: yaml.ScalarNode) -> str | None:
    """A plain scalar read as an int or a float whose value reads back as other text (`1.10`, `+5`, `1_000`): its
    text as written; else None."""
    if node.style is not None or node.tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        return None
    text = node.value
    try:
        value: float = int(text.replace("_", "")) if node.tag.endswith(":int") else float(text.replace("_", ""))
    except ValueError:
        return None
    return text if str(value) != text else None


def _scalar_key(node: yaml.ScalarNode) -> str | int:
    # Keys are strings in every recipe mapping we read; integer keys (golden curves) stay ints.
    value: str = node.value
    if node.tag == "tag:yaml.org,2002:int":
        try:
            return int(value)
        except ValueError:
            return value
    return value
