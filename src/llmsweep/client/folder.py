"""A folder of records (a `bench … --out` folder, a job folder of `run`, a point of `predict --out`): the `run.json`
that says what served them and how they are judged, and their summary recomputed from the folder's files. A light
module: it loads the metrics, not the client's HTTP stack (a run in virtual time and `summarize` write and read these
without sending a request)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from llmsweep import atomic
from llmsweep.client.files import RECORDS_FILE, RUN_FILE, SERVER_METRICS_FILE, SUMMARY_FILE
from llmsweep.errors import ResultInputError
from llmsweep.jsonline import load_json_file
from llmsweep.metrics import GateConfig, Summary, summarise
from llmsweep.metrics.model import MEASURED, SIMULATED, SOURCES, WALL, Source

if TYPE_CHECKING:
    from pydantic import BaseModel

_Settings = TypeVar("_Settings", bound="BaseModel")


def run_json(*, provenance: dict[str, Any], gates: GateConfig, client: dict[str, Any], gpus: int,
             source: Source) -> dict[str, Any]:
    """`run.json`: what a folder's summary is computed with besides its raw files (provenance, gates, the client's
    own figures, the GPU count, what served it), as `summarise_dir` reads it back. One shape for every folder of
    records: the client's (`bench`, a job of `run`), a job `run` ran in virtual time, a point of `predict --out`."""
    return {"provenance": provenance, "gates": gates.model_dump(mode="json"), "client": client, "gpus": gpus,
            "source": source}


def write_run_json(out: Path, doc: dict[str, Any]) -> None:
    """Write `out/run.json` (a :func:`run_json` document) atomically: a kill leaves the old file or the new one."""
    atomic.write_text(out / RUN_FILE, json.dumps(doc, indent=2, default=str))  # (a full disk leaves no run.json.tmp)


def summarise_dir(out: Path | str, *, write: bool = True) -> Summary:
    """Recompute a run directory's summary from `records.jsonl`, `server_metrics.jsonl` and `run.json`.

    Raises ResultInputError when the folder holds no run.json: what served its records (the summary's `source`) and
    the gates they were judged by are unknown, and a summary under made-up labels would be written over the one the
    folder holds."""
    out = Path(out)
    run_file = out / RUN_FILE
    if not run_file.is_file():
        raise ResultInputError(
            f"{out} has no {RUN_FILE}: what served its records and the gates they are judged by are unknown, so "
            f"its {SUMMARY_FILE} is left as it is",
            fix="summarize a folder `llmsweep bench`, `run` or `predict --out` wrote (each writes run.json beside "
                "records.jsonl); a `predict --out` folder of an llmsweep that wrote none: predict it again")
    info = load_json_file(run_file)
    if not isinstance(info, dict):
        raise ResultInputError(f"{run_file} is not a JSON object, so its {SUMMARY_FILE} is left as it is",
                               fix=_RESTORE)
    for key in ("provenance", "client"):
        if info.get(key) is not None and not isinstance(info[key], dict):
            raise ResultInputError(f"{run_file}: `{key}` is {_shown(info[key])}, not an object, so its {SUMMARY_FILE} "
                                   "is left as it is", fix=_RESTORE)
    if (cut := _cut_records(out / RECORDS_FILE, info)) is not None:
        raise ResultInputError(
            f"{out / RECORDS_FILE} ends inside a record ({cut}), though its run finished writing it (its {RUN_FILE} "
            f"has the run's end): the file was cut afterwards, so its {SUMMARY_FILE} is left as it is",
            fix=f"copy {RECORDS_FILE} whole again from where the run wrote it (a packed slice keeps whole lines: cut "
                "it after a newline)")
    if (foreign := _foreign_records(out / RECORDS_FILE, info)) is not None:
        raise ResultInputError(
            f"{out / RECORDS_FILE} holds records of another run: {foreign}, so its summary.json is left as it is",
            fix=f"put back the {RECORDS_FILE} this run wrote (or the {RUN_FILE} written with these records): records "
                "of two runs are no one measurement")
    metrics_path = out / SERVER_METRICS_FILE
    source = _recorded_source(out, info)
    summary = summarise(
        out / RECORDS_FILE,
        gpus=recorded_gpus(run_file, info),
        server_metrics=metrics_path if metrics_path.exists() else None,
        source=source,
        provenance=info.get("provenance"),
        gates=recorded_gates(run_file, info),
        client=info.get("client"),
    )
    if write:
        summary.write(out / SUMMARY_FILE)
    return summary


_RESTORE = f"restore {RUN_FILE} as the run wrote it (from a copy of the folder), or run the measurement again"


def recorded_gpus(run_file: Path, info: dict[str, Any]) -> int:
    """The GPU count `run.json` records (1 where it records none); ResultInputError naming the field and the fix
    when it is no whole number of at least 1 (`null`, a string, a fraction: a hand edit)."""
    gpus = info.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ResultInputError(
            f"{run_file}: `gpus` is {_shown(gpus)}, not a whole number of GPUs (at least 1), so the per-GPU figures "
            f"cannot be computed and its {SUMMARY_FILE} is left as it is",
            fix=f'set "gpus" in {RUN_FILE} to the number of GPUs that served the endpoint (1 when unknown: the '
                "figures are then per endpoint)")
    return gpus


def recorded_gates(run_file: Path, info: dict[str, Any]) -> GateConfig | None:
    """The gates `run.json` records, or None where it records none (the defaults); ResultInputError naming the field
    and the fix when one does not read (`recorded_settings`).

    A gate this release does not know is refused, not ignored: the folder's summary would be judged without it and
    written over the one the release that knew it wrote, a verdict that passes for the same judgement though one of
    its gates was dropped; and a gate name mistyped by hand would be set in vain without a word."""
    return recorded_settings(run_file, info, "gates", GateConfig, "gate")


def recorded_settings(run_file: Path, info: dict[str, Any], key: str, model: type[_Settings],
                      what: str) -> _Settings | None:
    """The `key` block of `run.json` (the gates, the read-back tolerances) as `model`, or None where it records none
    (the defaults); ResultInputError naming the field and the fix when it does not read: not an object, a value of the
    wrong type or out of range, or (where `model` forbids them) a `what` this release does not know."""
    from pydantic import ValidationError

    block = info.get(key)
    if key not in info:
        return None
    if not isinstance(block, dict):
        raise ResultInputError(f"{run_file}: `{key}` is {_shown(block)}, not an object of {what} settings, so its "
                               f"{SUMMARY_FILE} is left as it is", fix=_RESTORE)
    try:
        return model.model_validate(block)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        if first["type"] == "extra_forbidden":
            from llmsweep import __version__

            known = ", ".join(model.model_fields)
            raise ResultInputError(
                f"{run_file}: `{key}.{name}` is no {what} llmsweep {__version__} knows{more}; judged without it, the "
                f"summary would pass for the verdict of the release that wrote it, so its {SUMMARY_FILE} is left as "
                "it is",
                fix=f"summarize it with the llmsweep release that wrote it (or a newer one); a name mistyped by hand: "
                    f"correct or remove it (the {what}s: {known})") from None
        field = model.model_fields.get(name)
        about = "" if field is None or not field.description else f" ({field.description.rstrip('.')})"
        default = "" if field is None else f", {json.dumps(field.default, default=str)}"
        raise ResultInputError(
            f"{run_file}: `{key}.{name}` is {_shown(first.get('input'))}: {first['msg']}{more}, so its "
            f"{SUMMARY_FILE} is left as it is",
            fix=f"set `{key}.{name}` in {RUN_FILE} to a valid value{about}, or remove it for the default{default}"
        ) from None


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:60] + "…"


CLOCK_SLACK_S = 1.0
"""How far a record's wall-clock stamps may fall outside the run's `started_at`..`finished_at` (plus 0.05 % of the
run: the client's perf-counter clock and the kernel's receive stamps may drift apart that much over a long run)."""
TAIL_BYTES = 1 << 20
"""How much of the end of `records.jsonl` is read for its last whole record (one record's chunk times fit)."""


def _foreign_records(path: Path, info: dict[str, Any]) -> str | None:
    """Why `records.jsonl` cannot be the records of the run `run.json` describes, or None.

    A record of the client is named by its worker and its place in that worker's records (`w1-7`), and
    `run.json` says how many requests each worker started: a record the file holds twice, or one no worker of this
    run can have written (another worker, a higher place), is another run's, and so are more lines holding something
    than requests started (an unreadable line may be a record damaged in place; a blank line holds nothing, as
    `summarise` reads it). A wall-clock run's records were sent after its `started_at` and ended before its
    `finished_at` (its final run.json; a run killed before writing it has only the start): the file's first and last
    whole records are compared, so another run's file copied in is told from this run's own by its clock too. A folder
    whose run.json records no client workers (a run in virtual time, an import) is judged by its clock alone."""
    prov = info.get("provenance")
    prov = prov if isinstance(prov, dict) else {}
    workers = [w for w in (info.get("client") or {}).get("workers") or [] if isinstance(w, dict)]
    started = {int(w.get("worker", k)): int(w.get("started", 0)) for k, w in enumerate(workers)}
    if sum(started.values()) and (stranger := _stranger(path, started)) is not None:
        return stranger
    first, last = _ends(path)
    begin, end = prov.get("started_at"), prov.get("finished_at")
    if prov.get("clock") != WALL or not isinstance(begin, (int, float)) or first is None or last is None:
        return None
    end = end if isinstance(end, (int, float)) else None
    slack = CLOCK_SLACK_S + 5e-4 * max(0.0, (end or begin) - begin)
    stamps = [t for r in (first, last) for t in (r.get("sent_at"), r.get("end_at")) if isinstance(t, (int, float))]
    if not stamps:
        return None
    if min(stamps) < begin - slack or (end is not None and max(stamps) > end + slack):
        span = f"from {_when(begin)} to {_when(end)}" if end is not None else f"from {_when(begin)}"
        return (f"they were sent and ended between {_when(min(stamps))} and {_when(max(stamps))}, but the run of "
                f"its {RUN_FILE} ran {span}")
    return None


_CLIENT_ID = re.compile(r"w(\d+)-(\d+)")
"""A client record's id: its worker, and its place among that worker's records (`client.interpreter`)."""
_ID_HEAD = b'{"id":"'
"""How a line the client wrote begins (`records.record_line`: compact JSON, `id` first): its id is read from there."""


def _stranger(path: Path, started: dict[int, int]) -> str | None:
    """Why a records file holds what is not one of the requests `started` (worker -> requests started) names, or
    None: more lines holding something than requests started, a record no worker of the run wrote, a record twice.
    One pass over the lines; each id is read off the head of its line, a line of another spelling decoded whole."""
    if not path.is_file():
        return None
    seen: set[tuple[int, int]] = set()
    filled = 0
    stranger: str | None = None
    twice: str | None = None
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip() or not line.endswith(b"\n"):
                continue  # holds nothing (`summarise` skips it too), or the torn last line of a kill
            filled += 1
            if stranger is not None:
                continue
            if line.startswith(_ID_HEAD) and (close := line.find(b'"', len(_ID_HEAD))) > 0:
                rid: object = line[len(_ID_HEAD):close].decode("utf-8", "replace")
            else:
                doc = _record(line)
                if doc is None:
                    continue  # unreadable: a record damaged in place, or a line added (the count tells)
                rid = doc.get("id")
            m = _CLIENT_ID.fullmatch(rid) if isinstance(rid, str) else None
            key = (int(m.group(1)), int(m.group(2))) if m is not None else None
            if key is None or key[1] >= started.get(key[0], 0):
                stranger = repr(rid) if isinstance(rid, str) else "with no client id"
            elif key in seen:
                twice = twice or f"w{key[0]}-{key[1]}"
            else:
                seen.add(key)
    total = sum(started.values())
    if filled > total:
        return (f"it has {filled} lines, but the client of this run ({RUN_FILE}) started {total} requests: "
                "another run's records were added to it, or lines that are no record of this run's")
    if stranger is not None:
        said = ", ".join(f"w{k}: {n}" for k, n in sorted(started.items()))
        return (f"its record {stranger} is none of the requests the client of this run ({RUN_FILE}) started (a "
                f"worker's records are w<worker>-<n>, n counting from 0 below the requests it started: {said})")
    if twice is not None:
        return f"its record {twice!r} is there twice: another run's records were added to it, or a second copy of one"
    return None


def _cut_records(path: Path, info: dict[str, Any]) -> str | None:
    """How a finished run's `records.jsonl` was cut mid-record, or None: the client writes whole lines, so a last line
    without its newline is a torn write only in a run killed before its final `run.json` (no `finished_at`: its
    summary is invalid anyway, and the torn line is skipped); in a finished run's file it is a copy cut short."""
    prov = info.get("provenance")
    if not isinstance(prov, dict) or "finished_at" not in prov or not path.is_file():
        return None
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return None
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read()
    if tail.endswith(b"\n"):
        return None
    cut = len(tail) - tail.rfind(b"\n") - 1 if b"\n" in tail else len(tail)
    return f"its last {cut} bytes are part of a line without its end"


def _when(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _ends(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first and the last whole record of a records file (None where none reads; blank lines hold none)."""
    if not path.is_file():
        return None, None
    with path.open("rb") as fh:
        first = _record(next((line for line in fh if line.strip()), b""))
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - TAIL_BYTES))
        tail = fh.read().split(b"\n")
    last = next((r for line in reversed(tail[1:] if size > TAIL_BYTES else tail) if (r := _record(line))), None)
    return first, last


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _recorded_source(out: Path, info: dict[str, Any]) -> Source:
    """What served a folder's records, as recorded when they were: `run.json`'s `source`; for a `run.json` written
    before it carried one, its provenance's (where `bench` put it), else the summary the folder holds when it says
    `simulated` or `predicted` — never its `measured`, which older llmsweeps wrote by default whatever served (a
    summarize of such a folder, a kill before the source was stamped). Raises ResultInputError when none says: a
    made-up `measured` would be a label the run did not earn."""
    prov = info.get("provenance")
    summary_source = _summary_source(out / SUMMARY_FILE)
    for source in (info.get("source"), prov.get("source") if isinstance(prov, dict) else None,
                   summary_source if summary_source != MEASURED else None):
        if source in SOURCES:
            return cast(Source, source)
    raise ResultInputError(
        f"{out / RUN_FILE} does not say what served its records (no `source` there or in its provenance"
        + (f"; the `{MEASURED}` of its {SUMMARY_FILE} may be an older llmsweep's default" if summary_source == MEASURED
           else f", nor in {SUMMARY_FILE}") + "), so its summary would carry a label the run did not earn",
        fix=f'add "source": "{MEASURED}" (a real engine) or "{SIMULATED}" (the simulator) to {RUN_FILE}')


def _summary_source(path: Path) -> Any:
    try:
        doc = load_json_file(path)
    except (OSError, ValueError):
        return None
    return doc.get("source") if isinstance(doc, dict) else None
