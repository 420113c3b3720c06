"""Resolve what the user named (a run directory or a stored run id) into result points.

`compare`, `report` and the CLI accept either form; a run directory is read directly (nothing is written to the
store as a side effect), a run id is read from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llmsweep.errors import ResultInputError
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.point import ResultPoint, points_from_run, result_id_for, stood_on
from llmsweep.results.rundir import FOLDER_KINDS, RunDir, folder_kind, load_job, load_run, load_run_meta
from llmsweep.results.store import BATCH, Store, StoreError
from llmsweep.words import count_of, noun

_RUN_ID = _flag("run_id")
_REUSE = _flag("reuse")


def is_folder(ref: str) -> bool:
    """`ref` names a folder `load_run` has something to say about: a run (read it), or a job, `bench` or `predict`
    point folder (refuse it, naming what it is and what to pass) — never taken for a run id, nor looked up in the
    store (a command all of whose sides are folders needs no store unless it reads history)."""
    return folder_kind(Path(ref)) != "other"


def _neither(ref: str, store: Store | None) -> ResultInputError:
    return ResultInputError(f"{ref!r} is neither a run directory nor a run id in the store"
                            + (f" {store.path}" if store is not None else ""),
                            fix="pass the folder `llmsweep run` wrote, or a run id from `llmsweep results runs`")


def resolve_points(ref: str, store: Store | None, warn: Callable[[str], None] | None = None, *,
                   set_aside: bool = False) -> tuple[str, list[ResultPoint]]:
    """(run id, points) of a run directory path or a stored run id. A folder's job whose summary is set aside (no
    job.json beside it, or no outcome.json that judged it; with `set_aside`, one whose summary.json does not read:
    `report --with`, as `report` reads its own run) is not a point: `warn` is told which and why, so it is never
    left out unsaid."""
    if is_folder(ref):
        run = load_run(ref, set_aside=set_aside)
        return run.run_id, folder_points(run, ref, warn)
    if store is not None and store.has_run(ref):
        return ref, store.results(ref)
    raise _neither(ref, store)


def stored_result(ref: str, store: Store) -> ResultPoint:
    """The stored result `results show REF` names: a result id, RUN_ID/JOB or a job id (`Store.get`), or a job folder
    of a run — `RUN/jobs/<job>`, or `RUN/<job>` as a run folder and a job id —, read as the stored result of that
    job of that run (its run id as `results list --run RUN` reads a run folder's). A folder of another kind, an
    earlier attempt's folder, or a job of a run the store does not hold is refused, saying which and what to pass."""
    path = Path(ref)
    kind = folder_kind(path)
    if kind == "other" and folder_kind(path.parent) == "run" and folder_kind(path.parent / "jobs" / path.name) == "job":
        path, kind = path.parent / "jobs" / path.name, "job"  # RUN/<job>: the job's folder under its run folder
    if kind == "other":
        return store.get(ref)
    if kind != "job":
        raise ResultInputError(f"{ref} is {FOLDER_KINDS[kind]}, not one stored result",
                               fix="give a result id, RUN_ID/JOB or a job folder of a run (`llmsweep results list"
                                   + (f" {_RUN_ID} {ref}` lists its results)" if kind == "run" else "` lists them)"))
    if path.parent.name == "attempts":
        raise ResultInputError(f"{ref} is an earlier attempt of job {path.parent.parent.name}: the store keeps "
                               "only each job's last attempt", fix=f"show {path.parent.parent} instead")
    run_root = path.parent.parent
    run_id, _ = load_run_meta(run_root)
    job = load_job(path, set_aside=True)
    job_id = job.job_id if job is not None else path.name
    if not store.has_run(run_id):
        raise ResultInputError(f"{ref} is a job of run {run_id}, which the results store {store.path} does not hold",
                               fix=f"ingest the run first (`llmsweep results ingest {run_root}`)")
    return store.get(f"{run_id}/{job_id}")


def folder_points(run: RunDir, ref: str, warn: Callable[[str], None] | None = None) -> list[ResultPoint]:
    """The points of a run folder read (`ref`: as the user named it): `resolve_points`' for a folder, for a command
    that needs the folder's artifacts too (`results list --run DIR`: its jobs' outcomes); `warn` is told of each job
    whose summary is set aside."""
    for art in run.jobs:
        if (why := art.unread or art.unjudged) and warn is not None:
            warn(f"{ref}: {why}")
    return points_from_run(run)


REUSED_GONE = ("the results store does not hold it as it was reused (the result is gone: its run measured the job "
               "again under another configuration since without keeping the result for the runs that stood on it — "
               "the store could not be reached then, or an llmsweep that kept none measured it —, or was stored anew "
               "from a folder without it; or it does not read)")
"""Why a point `run --reuse` stood a job on is not drawn (the dashboard, `results frontier`)."""


def reused_points_of(store: Store, meta: Mapping[str, Any], run_id: str,
                     said: Callable[[str], None] | None = None,
                     gone: Callable[[str], None] | None = None, *, left: str = "drawn") -> dict[str, ResultPoint]:
    """The stored results `run --reuse` stood a run's jobs on (`Store.reused_points`), by its job id, read as the
    run's points (`stood_on`) — what its dashboard draws in its series beside its own; with `said`, told instead
    what they are and where they are listed (a listing or export of the run's own results leaves them out: each
    result under the run that measured it); `gone` is told of the jobs whose result the store no longer holds as
    reused (`REUSED_GONE`), not drawn (`left`: what they are not, in its words: `compared` for `compare`)."""
    from llmsweep.results.rundir import reused_of

    reused = reused_of(meta)
    if not reused:
        return {}
    if said is not None:
        sources = sorted({str(r.get("run_id")) for r in reused.values()})
        said(f"run {run_id}: {count_of(len(reused), 'job')} stood on stored results of {noun(len(sources), 'run')} "
             f"{', '.join(sources)} "
             f"(`run {_REUSE}`), listed under that run, not here (`{_RUN_ID} {sources[0]}`)")
        return {}
    found = store.reused_points(reused, by=run_id)
    missing = sorted(set(reused) - set(found))
    if missing and gone is not None:
        gone(f"run {run_id}: {count_of(len(missing), 'job')} stood on a stored result not {left}: {REUSED_GONE} "
             f"({', '.join(missing)})")
    return stood_on(run_id, found)


def stood_on_points(ref: str, run_id: str, store: Store | None,
                    warn: Callable[[str], None] | None = None) -> list[ResultPoint]:
    """The stored results `run --reuse` stood the jobs of run `ref` (a folder or a stored run id) on, read as its
    points (`reused_points_of`): what its dashboard and frontier draw beside the results it measured. `compare`'s
    baseline stands on them as its frontier does: a baseline run that reused every job had compared as a run without
    a result. None without a store to read them from; `warn` is told of those the store no longer holds."""
    if store is None:
        return []
    return list(reused_points_of(store, run_meta_of(ref, store), run_id, gone=warn, left="compared").values())


def stands_on_stored(ref: str) -> bool:
    """Whether the run folder `ref` records jobs `run --reuse` stood on stored results (its `run.json`): reading its
    points whole needs the store. False for a stored run id (the store is read then anyway)."""
    from llmsweep.results.rundir import reused_of

    return is_folder(ref) and bool(reused_of(run_meta_of(ref, None)))


def recorded_inputs(ref: str, run_id: str, store: Store | None) -> dict[str, str]:
    """The reuse key each job of run `ref` (a folder or a stored run id) was run under, as its `run.json` records it
    (`reuse_keys`), by the result id of the job's result: what decides a simulated result (`changes.reuse`), so
    `compare` can tell two virtual-time results of the same inputs (`compare.PointComparison.same_inputs`). {} for a
    run that records none (an import, a run from before keys were recorded)."""
    keys = run_meta_of(ref, store).get("reuse_keys")
    if not isinstance(keys, Mapping):
        return {}
    return {result_id_for(run_id, str(job)): key for job, key in keys.items() if isinstance(key, str) and key}


def recorded_measurements(ref: str, points: Iterable[ResultPoint], store: Store | None) -> dict[str, str]:
    """The measurement definitions the results of run `ref` (a folder or a stored run id; `points`: its results, and
    the stored ones its `run --reuse` stood jobs on, which its reuse keys matched under the same definitions) were
    measured under, as its `run.json` records them (`changes.reuse.recorded_measurement`), by result id: "" for each
    where the run records none (a run of an llmsweep before it was recorded, an import), so `compare` names it as not
    recorded (`compare.served_apart`)."""
    from llmsweep.changes.reuse import recorded_measurement

    measurement = recorded_measurement(run_meta_of(ref, store)) or ""
    return {p.result_id: measurement for p in points}


def run_meta_of(ref: str, store: Store | None) -> Mapping[str, Any]:
    """A run's record (`run.json`, as the store keeps it in `runs.meta`): the stored run's, else its folder's."""
    if store is not None and store.has_run(ref):
        return store.run_meta(ref)
    return load_run_meta(Path(ref))[1] if is_folder(ref) else {}  # run.json alone: its jobs' summaries not read


def resolve_run_dir(ref: str, store: Store | None, *, set_aside: bool = False) -> RunDir:
    """The run folder a run directory path or a stored run id names (a stored run: the folder it was ingested from),
    for what needs the run's artifacts and not only its stored points (`report`); `set_aside`: a job's summary.json
    that does not read is a job without a result, its reason said (`load_run`)."""
    if is_folder(ref):
        return load_run(ref, set_aside=set_aside)
    if store is None or not store.has_run(ref):
        raise _neither(ref, store)
    path = store.run_path(ref)
    if path is None:
        raise ResultInputError(f"run {ref!r} in {store.path} has no run folder: its rows were imported",
                               fix=f"draw it beside a run of yours with `llmsweep report RUN --with {ref}`, or export "
                                   f"it with `llmsweep results export {_RUN_ID} {ref}`")
    if folder_kind(Path(path)) != "run":
        raise ResultInputError(f"run {ref!r} in {store.path} was ingested from {path}, which is no longer a run folder",
                               fix="pass the run folder where it is now (moved or copied), or re-run it")
    return load_run(path, set_aside=set_aside)


def started_at(text: object) -> datetime | None:
    """A run's recorded start (`run.json`'s `started`, ISO 8601) as an aware datetime; None when unrecorded or
    unreadable (a time without a zone is UTC, as `run` writes it)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def run_started(ref: str, run_id: str, store: Store | None) -> datetime | None:
    """When the run `ref` names (a run folder, or the stored run `run_id`) started, as it recorded; None when it does
    not say (an imported run)."""
    if is_folder(ref):
        return started_at(load_run(ref).meta.get("started"))
    if store is not None and store.has_run(run_id):
        return started_at(store.run_meta(run_id).get("started"))
    return None


def history_from_store(store: Store, exclude_runs: Iterable[str], before: datetime | None,
                       warn: Callable[[str], None] | None = None,
                       point_keys: Collection[str] | None = None) -> list[ResultPoint]:
    """Earlier valid llmsweep results in the store (never imported rows, never invalid or smoke ones): candidates for
    run-to-run variance. Earlier means a run that started before `before` — the later start of the two compared
    runs: a run stored after both is no part of their history, and a run that records no start is not known to be
    earlier. `before` None (neither compared run records its start): no history. `compare` keeps only those of A's
    point *and* configuration (`results.compare.same_configuration`).

    A stored run whose rows do not read is left out of the history, `warn` told which row and the fix: history only
    informs the noise band, and one damaged row of an earlier run must not stop the comparison of two runs that
    read (the compared runs themselves are read apart, and a bad row of theirs is still an error).

    `point_keys`: the exact point identities the history may hold (A's, when `compare` matches points exactly): only
    those rows are read, and only valid llmsweep ones in any case, so the history of two small runs costs what they
    hold, not what the store holds (it had parsed every earlier result: 10 s and 890 MB on a 10k-result store)."""
    if before is None:
        return []
    skip = set(exclude_runs)
    earlier = [r.run_id for r in store.runs() if (t := started_at(r.started)) is not None and t < before
               and r.run_id not in skip]
    out: list[ResultPoint] = []
    keys = None if point_keys is None or len(set(point_keys)) > BATCH else set(point_keys)
    for run_id in earlier:  # in the order they were stored, as one read of every result gave them
        try:
            points = store.results(run_id, point_keys=keys, origin="llmsweep", verdict="valid")
        except StoreError as exc:
            if warn is not None:
                warn(f"history leaves out run {run_id}: {exc.one_line()}")
            continue
        out += [p for p in points if p.origin == "llmsweep" and p.verdict == "valid"]
    return out
