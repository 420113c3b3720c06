"""Read trace corpora: a JSONL file (one trace per line), a JSON file (one trace or a list), a directory of either,
or a Hugging Face dataset id (downloaded with `huggingface_hub.snapshot_download` where the hub is reachable), at a
revision (`revision`: a commit, branch or tag; default its latest). A sweep resolves each dataset once to the commit
it replays (`pin_dataset`) and reads that commit at every point.

Errors name the file and line and what to do. Directories skip JSON files that are not traces (a `manifest.json`
beside per-session files) with a debug note; a file named explicitly must be a trace corpus.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import logging
import re
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmsweep.errors import DatasetError
from llmsweep.spec.workload import AGENTX_LOADERS
from llmsweep.words import count_of
from llmsweep.workload.traces.schema import Corpus, SubagentEntry, Trace

log = logging.getLogger(__name__)

TRACE_SUFFIXES = (".jsonl", ".json")
GZIP_SUFFIX = ".jsonl.gz"
"""Gzip-compressed JSON lines (a run's kept corpus, `workload.traces.kept`; or any corpus compressed to travel)."""
_GZIP_MAGIC = b"\x1f\x8b"



def load_traces(source: str | Path, *, limit: int | None = None, revision: str | None = None) -> list[Trace]:
    """All traces of `source` (file, directory or HF dataset id, at `revision`), in a stable order (sorted paths,
    file order). A whole corpus (no `limit`) is read once per process while its files keep their bytes
    (`load_corpus`): treat the traces as read-only."""
    if limit is None:
        return list(load_corpus(source, revision=revision).traces)
    return _read(source, limit, _source_files(source, revision))


_LOADED: dict[str, Corpus] = {}
"""The last corpus `load_corpus` read, by the digest of its files' bytes: one, as a corpus read into memory can take
gigabytes, and a sweep replays one."""
_LOADING = threading.Lock()


def load_corpus(source: str | Path, *, revision: str | None = None) -> Corpus:
    """Every trace of `source` (`load_traces`) with its memo (`Corpus`), read once per process: the points of a
    sweep share it (each read the whole corpus again, 2.3 CPU-s for 120 MB of JSON lines, more than predicting a
    one-hour point). Read again when any of its files changed: the key is a digest of their bytes (0.1 s for 120 MB)."""
    files = _source_files(source, revision)
    digest = hashlib.sha256()
    for path, _ in files:
        digest.update(f"{path}\0".encode())
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    key = digest.hexdigest()
    with _LOADING:
        corpus = _LOADED.get(key)
        if corpus is None:
            _LOADED.clear()  # before reading: never two corpora in memory for the cache's sake
            corpus = _LOADED[key] = Corpus(tuple(_read(source, None, files)))
        return corpus


def _read(source: str | Path, limit: int | None, files: list[tuple[Path, bool]] | None = None) -> list[Trace]:
    return list(stream_traces(source, limit=limit, files=files))


def stream_traces(source: str | Path, *, limit: int | None = None, files: list[tuple[Path, bool]] | None = None,
                  revision: str | None = None) -> Iterator[Trace]:
    """`load_traces` one trace at a time, none kept: for one pass over a corpus (`traces stats`), whose traces held
    at once take several times the file's size in memory (3.7 GB for a 0.5 GB traces.jsonl). A source that holds no
    trace is refused once it is read through."""
    count = 0
    for trace in iter_traces(source, files, revision=revision):
        yield trace
        count += 1
        if limit is not None and count >= limit:
            return
    if not count:
        raise DatasetError(
            f"no traces found in {source}",
            fix="point at a traces.jsonl, a directory of trace JSON/JSONL files, or a Hugging Face dataset id",
        )


def iter_traces(source: str | Path, files: list[tuple[Path, bool]] | None = None, *,
                revision: str | None = None) -> Iterator[Trace]:
    """The traces of `source` (at `revision`, a hub dataset's) one by one (`files`: its `_source_files`, when already
    resolved). A trace id seen
    before in the source is refused, naming both places: replay knows a session by its id (records, cache-bust
    markers, block text), and a folder holding per-session files beside the traces.jsonl made from them replayed
    every session twice, unsaid."""
    first_at: dict[str, str] = {}
    for path, strict in _source_files(source, revision) if files is None else files:
        for where, trace in _located_traces(path, strict=strict):
            first = first_at.setdefault(trace.id, where)
            if first is not where:
                raise DatasetError(
                    f"{where}: trace id {trace.id!r} appears again (first at {first}): a corpus holds each session "
                    "once, and replay tells sessions apart by their id",
                    fix="remove the duplicate session, or give it an id of its own (a folder holding per-session "
                        "files beside the traces.jsonl built from them: point at one or the other)")
            yield trace


def _source_files(source: str | Path, revision: str | None = None) -> list[tuple[Path, bool]]:
    """The files `source` names, in reading order, each with whether it must be a trace file (`read_trace_file`'s
    `strict`: a file named explicitly, or a dataset's traces.jsonl); a hub dataset's at `revision`."""
    where = _located(source)
    if isinstance(where, Path):
        if where.is_file():
            return [(where, True)]
        if where.is_dir():
            return [(p, False) for p in _dir_files(where)]
    elif where is not None:  # a hub dataset: what `pin_dataset` pins
        local = download_dataset(where, revision)
        for canonical in (local / "traces.jsonl", local / f"traces{GZIP_SUFFIX}"):  # the dataset's default split;
            if canonical.is_file():  # other JSON there is metadata
                return [(canonical, True)]
        return [(p, False) for p in _dir_files(local)]
    source = _named(source)  # a loader id's missing local copy is said by the path it looked for
    if "/" in str(source) or Path(str(source)).suffix:
        raise DatasetError(f"trace source {source} does not exist (no such file or directory)",
                           fix="check the path (relative paths are read from the current directory); hub dataset ids "
                               "look like 'org/name'")
    raise DatasetError(
        f"trace source {source} is neither a file, a directory nor a Hugging Face dataset id",
        fix="check the path; hub ids look like 'org/name'",
    )


def read_trace_file(path: Path, *, strict: bool = True) -> Iterator[Trace]:
    """Traces of one file. `.jsonl`: one per non-blank line; `.jsonl.gz`, or a `.jsonl` that is a gzip stream (a
    `.gz` that kept its name): the same, decompressed as read. `.json` (or another name, gzip-compressed or not): an
    object or a list of objects, or, when it holds one JSON value after another, JSON lines (`datasets`' `to_json`
    writes them under `.json`). A UTF-8 byte order mark (Notepad's and PowerShell's UTF-8) is skipped: it made line 1
    'not valid JSON'."""
    for _, trace in _located_traces(path, strict=strict):
        yield trace


def _located_traces(path: Path, *, strict: bool) -> Iterator[tuple[str, Trace]]:
    """`read_trace_file`'s traces, each with where it was read (`file:line`, and the item of a JSON list)."""
    if path.suffix == ".jsonl" or path.name.endswith(GZIP_SUFFIX):
        yield from _trace_lines(path)
        return
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise DatasetError(f"{path}: the gzip stream is damaged ({exc})",
                               fix="copy or regenerate the file whole") from None
    try:
        data = json.loads(raw.removeprefix(codecs.BOM_UTF8))  # json reads UTF-8, -16 and -32
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc.reason) from None
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # one value after another: JSON lines under another name
            yield from _trace_lines(path)
            return
        raise DatasetError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg})", fix="repair or regenerate the trace file"
        ) from exc
    except RecursionError:  # (a .jsonl line is read by pydantic, which bounds its depth itself)
        raise DatasetError(f"{path}: JSON nested too deep to be a trace", fix="repair or regenerate the trace file"
                           ) from None
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not strict and not (isinstance(item, dict) and "requests" in item):
            log.debug("skipping %s: not a trace object", path)
            return
        where = f"{path}:1" + (f" (item {i})" if isinstance(data, list) else "")
        yield where, _parse(obj=item, where=where)


def _trace_lines(path: Path) -> Iterator[tuple[str, Trace]]:
    for lineno, line in json_lines(path):
        where = f"{path}:{lineno}"
        yield where, _parse(json_text=line, where=where)


def json_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each non-blank line of a JSON-lines file, plain or gzip-compressed (a `.gz`, or a gzip
    stream under another name), a UTF-8 byte order mark skipped: the one reader of trace and Mooncake files. Bytes:
    a line that is not UTF-8 is named by its number where it is parsed (pydantic checks it); a UTF-16 file and a
    damaged gzip stream are DatasetErrors naming the file."""
    with path.open("rb") as raw:
        gzipped = raw.read(2) == _GZIP_MAGIC
    lineno = 0
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as fh:
            for lineno, line in enumerate(fh, start=1):
                if lineno == 1:
                    line = line.removeprefix(codecs.BOM_UTF8)
                    if line.startswith(tuple(_NOT_UTF8)):
                        raise _not_utf8(path, _NOT_UTF8[line[:2]])
                if line.strip():
                    yield lineno, line
    except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        if not gzipped:
            raise
        raise DatasetError(f"{path}: the gzip stream is damaged after line {lineno} ({exc})",
                           fix="copy or regenerate the file whole") from None


_NOT_UTF8 = {codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16"}
"""How a .jsonl trace file that is not UTF-8 text starts (PowerShell's `>` writes UTF-16)."""


def _not_utf8(path: Path, what: str) -> DatasetError:
    """A trace file that is not UTF-8 text: said, not a traceback or 'not valid JSON' at line 1."""
    return DatasetError(f"{path}: not UTF-8 text ({what})",
                        fix="save the traces as UTF-8 JSON lines (gzip-compressed ones are read too)")


def _dir_files(directory: Path) -> list[Path]:
    """A folder's trace files in reading order. One that holds a file and its gzip copy (`x.jsonl` beside
    `x.jsonl.gz`) is refused: read both, every session of it would replay twice."""
    files = sorted(p for p in directory.rglob("*")
                   if p.is_file() and (p.suffix in TRACE_SUFFIXES or p.name.endswith(GZIP_SUFFIX)))
    files = [p for p in files if not any(part.startswith(".") for part in p.relative_to(directory).parts)]
    named = set(files)
    twice = [p for p in files if p.name.endswith(GZIP_SUFFIX) and p.with_name(p.name[:-3]) in named]
    if twice:
        raise DatasetError(f"trace folder {directory} holds {twice[0].with_name(twice[0].name[:-3]).name} and its "
                           f"gzip copy {twice[0].name}" + (f" (and {count_of(len(twice) - 1, 'more such pair')})"
                                                          if len(twice) > 1 else "") +
                           ": both would be read, and each of their sessions replayed twice",
                           fix="keep one of each pair in the folder (move the other out), or name the file itself "
                               "as the trace source")
    return files


def row_error(exc: ValidationError, *, whole: str = "") -> str:
    """A trace row's first validation error as `loc: message`, the value given where pydantic's own message omits
    it (a strict block id's `Input should be a valid integer`); `whole` names an error at the row itself."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or whole
    said = first["msg"]
    value = first.get("input")
    if first["type"] in ("int_type", "float_type") and isinstance(value, bool | str | float):
        said += f" (given `{json.dumps(value)}`)"
    return f"{loc}: {said}"


def _parse(*, where: str, json_text: str | bytes | None = None, obj: Any = None) -> Trace:
    try:
        trace = Trace.model_validate_json(json_text) if json_text is not None else Trace.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise DatasetError(
                f"{where}: not valid JSON ({first['msg']})", fix="repair or regenerate the trace file"
            ) from None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise DatasetError(
            f"{where}: not a Weka trace: {row_error(exc)}{more}",
            fix="each trace needs id and requests[]; each request t, in, out (see research/agentx-spec §2.3)",
        ) from None
    _refuse_unordered(trace, where)
    return trace


def _refuse_unordered(trace: Trace, where: str) -> None:
    """A trace's top-level requests must be in the order they started (the format lists `requests[]` by first
    appearance): replay derives each turn's delay from the previous turn's end and samples its warm-start point t*
    by bisecting the turns' starts, so a turn listed after a later one loaded, and the replay ran the session on
    another timeline, unsaid."""
    prev: tuple[int, float] | None = None
    for k, entry in enumerate(trace.requests):
        if isinstance(entry, SubagentEntry):
            continue
        if prev is not None and entry.t < prev[1]:
            raise DatasetError(
                f"{where}: trace {trace.id!r}: requests.{k}.t = {entry.t:g} s is before requests.{prev[0]}.t = "
                f"{prev[1]:g} s, the top-level request listed above it: the requests are not in the order they "
                "started", fix="sort each trace's requests[] by t (the Weka format lists them chronologically)")
        prev = (k, entry.t)


def _looks_like_hub_id(text: str) -> bool:
    """`org/name`, and not a local path that does not exist: a trace file's name (`data/traces.jsonl`) or a path
    under a local folder (`data/x` with `data/` here) — those were looked up on the hub and said 'could not fetch'."""
    parts = text.split("/")
    if len(parts) != 2 or not all(parts) or text.startswith((".", "~")):
        return False
    file_like = parts[1].endswith((*TRACE_SUFFIXES, GZIP_SUFFIX))
    return not file_like and not Path(parts[0]).is_dir()


def _named(source: str | Path) -> str:
    """`source` with an AgentX loader id mapped to its Hugging Face dataset (`AGENTX_LOADERS`): the one place one is."""
    return AGENTX_LOADERS.get(str(source), str(source))


def _located(source: str | Path) -> Path | str | None:
    """Where trace source `source` is read from: a local file or folder (a Path), else the Hugging Face dataset it
    names (its id, a loader id's `_named`), else None (neither). A path here comes first: `source` itself, then, for a
    loader id, a folder named like its dataset (a local copy, `hf download --repo-type dataset org/name --local-dir
    org/name`), read offline as `--traces org/name` reads it."""
    for local in dict.fromkeys((str(source), _named(source))):
        if Path(local).exists():
            return Path(local)
    dataset = _named(source)
    return dataset if _looks_like_hub_id(dataset) else None


def hub_dataset(source: str) -> str | None:
    """The Hugging Face dataset `source` is read from (an AgentX loader id mapped to its dataset), or None when it is
    a local file or directory (or no dataset id at all)."""
    where = _located(source)
    return where if isinstance(where, str) else None


_COMMIT = re.compile(r"[0-9a-f]{40}")


def is_commit(revision: str) -> bool:
    """Whether a dataset revision is a commit (what a pin resolves to), not a branch or a tag that may move."""
    return _COMMIT.fullmatch(revision) is not None


def pin_dataset(source: str, revision: str | None = None) -> str:
    """The commit hub trace source `source` (a dataset id or an AgentX loader id) is at, at `revision` (a commit,
    branch or tag; default its latest), its snapshot fetched into the hub cache (or found there): what a sweep
    replays at every point (`plan.point.pin_trace_sources`), whatever commits the dataset gets meanwhile. A
    snapshot's folder is named by its commit (`snapshots/<commit>` in the hub cache)."""
    repo_id = hub_dataset(source)
    if repo_id is None:
        raise DatasetError(f"trace source {source} is not a Hugging Face dataset: it has no revision to pin",
                           fix="pin a hub dataset id ('org/name') or an AgentX loader id")
    local = download_dataset(repo_id, revision)
    if not is_commit(local.name):
        raise DatasetError(
            f"the hub snapshot of trace dataset {repo_id!r}{_at(revision)} is {local}, whose folder names no commit: "
            "the revision it replays cannot be pinned",
            fix="use the Hugging Face cache layout (no local_dir), or download the dataset and pass its directory")
    return local.name


def _at(revision: str | None) -> str:
    return f" at revision {revision}" if revision else ""


_SNAPSHOTS: dict[tuple[str, str, str], Path] = {}
"""The snapshot folder of each (hub cache, dataset, commit) `download_dataset` got in this process. A commit's files
never change, so a process fetches it (or finds it in the cache) once, however often it reads it: a run's pin, its
check, each point's load, each `discover` stage's pin and check (a run of 2 points had asked `snapshot_download` 5
times, a small discovery 13). Keyed by commit only: a branch or tag is resolved afresh each time it is asked for."""


def download_dataset(repo_id: str, revision: str | None = None) -> Path:
    """Local snapshot of a Hugging Face dataset's JSON/JSONL files, gzip-compressed JSON lines too, at `revision`
    (default its latest; hub cache: network only on a cache miss, or to resolve a branch or tag). A commit already
    fetched in this process is not asked for again while its folder is there (`_SNAPSHOTS`)."""
    try:
        from huggingface_hub import constants, snapshot_download
    except ModuleNotFoundError:
        raise DatasetError(
            f"loading trace dataset {repo_id!r} from the hub needs huggingface_hub",
            fix="pip install 'llmsweep[hf]', or download the dataset and pass its directory",
        ) from None
    cache = str(constants.HF_HUB_CACHE)
    commit = revision if revision is not None and is_commit(revision) else None
    known = _SNAPSHOTS.get((cache, repo_id, commit)) if commit is not None else None
    if known is not None and known.is_dir():
        return known
    try:
        local = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision,
                                       allow_patterns=["*.jsonl", "*.json", f"*{GZIP_SUFFIX}"]))
    except Exception as exc:  # network, auth or missing repo: one message for the user
        raise DatasetError(
            # the hub's own text runs over several lines: a reason is one line (tables, reports, the store)
            f"could not fetch trace dataset {repo_id!r}{_at(revision)} from the Hugging Face hub: "
            f"{' '.join(str(exc).split())}",
            fix="check the id and network access (HF_TOKEN if gated), or pass a local directory",
        ) from exc
    if is_commit(local.name) and commit in (None, local.name):  # the cache's snapshots/<commit>
        _SNAPSHOTS[(cache, repo_id, local.name)] = local  # a branch's too: the commit it was at, for its pin's reads
    return local
