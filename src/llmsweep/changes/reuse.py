"""Reuse: a job whose full identity matches a stored valid result is not run again.

The identity (:func:`reuse_key`) is the recipe fingerprint, the image, the rendered launch (the LaunchSpec's
fingerprint: argv, env, files — so engine args, env and the simulator-or-engine choice), the resolved workload, the
job's concurrency and repeat index (for a repeat, the sample it draws: `workload.scenario.sample_name`; for a later
copy of its point on its server, which copy: `Job.server_copy`), llmsweep's
measurement definitions (`metrics.version`), for a job the simulator runs the simulator's digest (its code and the
catalogs it reads: `sim.identity`), the gates the run judges the job's verdict by (`job_gates`: required power, the
read-back tolerance of a pinned acceptance), and what the local files the job names hold (`local_files_digest`: its
model, draft model and tokenizer paths, and a path its engine args or its server's environment — `serve.env`, a
worker's `additional-settings` — name).

The workload config names a trace corpus by where it lives (a path, a dataset id), not by what it holds, and the
launch does not say whether a simulated job runs in virtual or wall-clock time. So a job's recorded key
(:func:`reuse_keys`) is that identity followed by its :class:`ReuseContext`: the source it would produce (simulated or
measured), its clock (virtual or wall) and the digest of the corpus it would replay, read from the trace source now.
`llmsweep run` records every job's key in its `run.json` (`reuse_keys`), and the digest of each part of each key's
identity (`reuse_parts`: :data:`RECORDED_PARTS`), which says what differs from a key it later meets, part by part;
the store keeps that file, and `run --reuse` looks the keys of the jobs it is about to launch up there
(`results.store.Store.reusable`), which reuses a stored result only when the identity matches *and* the stored
result's own record (its source, its provenance's clock, the corpus digest its summary read back) matches the
context, and says why when it does not.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmsweep.engine_ids import SIM
from llmsweep.metrics.model import run_clock, run_source
from llmsweep.metrics.version import measurement_identity
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan import Job
from llmsweep.workload.scenario import repeat_index, repeat_sample
from llmsweep.workload.traces.digest import FILE_DIGEST_PREFIX

if TYPE_CHECKING:
    from llmsweep.execute.base import ImageMount
    from llmsweep.execute.lifecycle import LifecycleSettings

_REQUEST_TIMEOUT = _flag("request_timeout")
_REQUIRE_POWER = _flag("require_power")


CONTEXT_SEP = "/"
UNREADABLE = "?"
"""The corpus part of a context whose trace source cannot be read now: it matches no stored result."""
FILE_DIGEST = FILE_DIGEST_PREFIX
"""The corpus part of a job replaying a trace file (a Mooncake trace): the file's bytes
(`workload.traces.digest.file_digest`), compared with the key the stored run recorded, and, since Mooncake summaries
record it (`provenance.workload.corpus_digest`), with the summary's."""


@dataclass(frozen=True, slots=True)
class ReuseContext:
    """What a job's run would produce beyond its identity: `source` (simulated | measured), `clock` (virtual | wall),
    `corpus`, the short digest of the corpus it would replay ("" when the workload config fixes the corpus:
    fixed-length prompts, a synthetic corpus; `?` when the source cannot be read), and `served`: where a real engine
    of a job would run, `image` or `host` (the local executor runs the host's engine, whatever image the job names,
    `allow_image`); "" for a simulated job or one neither names an image nor runs on the host (and in keys recorded
    before it was); and for a job served on the host `engine`, the version of the engine the host has installed now
    (`execute.host_engine`; `?` when it cannot be read: it matches no stored result) — no image pins that build."""

    source: str
    clock: str
    corpus: str = ""
    served: str = ""
    engine: str = ""

    def render(self) -> str:
        parts: tuple[str, ...] = (self.source, self.clock, self.corpus or "-")
        if self.served:
            parts = (*parts, self.served)
        if self.engine:
            parts = (*parts, self.engine.replace(CONTEXT_SEP, "_"))
        return CONTEXT_SEP.join(parts)

    @classmethod
    def parse(cls, text: str) -> ReuseContext | None:
        parts = text.split(CONTEXT_SEP, 4)
        if len(parts) not in (3, 4, 5):
            return None
        return cls(parts[0], parts[1], "" if parts[2] == "-" else parts[2], parts[3] if len(parts) >= 4 else "",
                   parts[4] if len(parts) == 5 else "")


CONTEXT_PARTS = tuple(f.name for f in dataclasses.fields(ReuseContext))
"""The parts of a :class:`ReuseContext`, as messages name them (its fields, in order)."""


def split_key(key: str) -> tuple[str, ReuseContext | None]:
    """(identity, context) of a recorded key; a key recorded before contexts were has none."""
    base, sep, rest = key.partition(CONTEXT_SEP)
    return (base, ReuseContext.parse(rest)) if sep else (key, None)


def reuse_key(job: Job, launch_fingerprint: str, *, repeat: int = 1, simulator: str | None = None,
              gates: dict[str, object] | None = None, local_files: str | None = None) -> str:
    """64 hex: what must be equal for a stored result to stand for this job. `simulator`: the simulator's digest
    (`sim.identity`) for a job it runs; `gates`: the run's settings that judge the job's verdict (required power, the
    read-back tolerance of a pinned acceptance); `local_files`: what the job's local model, draft model and tokenizer
    paths, and the local paths its engine args and server environment name, hold (`local_files_digest`; a job without
    one keeps the key it had before it was part of the identity)."""
    return _digest(reuse_doc(job, launch_fingerprint, repeat=repeat, simulator=simulator, gates=gates,
                             local_files=local_files))


def reuse_doc(job: Job, launch_fingerprint: str, *, repeat: int = 1, simulator: str | None = None,
              gates: dict[str, object] | None = None, local_files: str | None = None) -> dict[str, object]:
    """What :func:`reuse_key` hashes, part by part (:data:`KEY_PARTS` names them)."""
    doc: dict[str, object] = {
        "recipe_fingerprint": job.recipe_fingerprint,
        "image": job.image,
        "launch": launch_fingerprint,
        # without a hub dataset's pinned revision: what the corpus holds is the context's corpus digest (the source
        # is named by where it lives), and keys recorded before revisions were pinned stay as they were
        "workload": job.workload.keyed(),
        "conc": job.conc,
        "eval": [job.run_eval, job.eval_only, job.eval_conc, job.eval_all_concs],
        "repeat": repeat,
        "measurement": measurement_identity(),
        "simulator": simulator,
        "gates": gates or {},
    }
    if local_files is not None:
        doc["local_files"] = local_files
    if job.server_copy is not None:  # a later copy of its point on its server draws samples of its own; the first
        doc["copy"] = job.server_copy  # copy's key is the one a job planned once has
    if repeat > 1:  # what a repeat draws (a first run's key is what it always was)
        doc["sample"] = repeat_sample(job.workload, job.concs[0], repeat, job.server_copy)
    return doc


def _digest(value: object) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


KEY_PARTS: dict[str, str] = {
    "recipe_fingerprint": "the recipe (its fingerprint)",
    "image": "the image",
    "workload": "the workload",
    "conc": "the concurrency",
    "eval": "the eval marks",
    "repeat": "the repeat index",
    "measurement": "llmsweep's measurement definitions (`metrics.version`)",
    "launch": "the rendered launch (engine args, env, files)",
    "simulator": "the simulator's code or a catalog file it reads (`sim.identity`)",
    "gates": f"the gates the run judges the verdict by (`run {_REQUIRE_POWER}`, `run --al-tolerance`, "
             f"`run {_REQUEST_TIMEOUT}`)",
    "local_files": "what the job's local model, draft model or tokenizer paths, or a local file its engine args or "
                   "server environment (serve.env, a worker's additional-settings) name, hold",
    "sample": "the sample a repeat draws (`workload.scenario.sample_name`: repeat k of every arm of a point draws one)",
    "copy": "which copy of its point on its server the job is (`server-copy`: a job planned twice, a repeat of a "
            "later copy draws its own sample)",
}
"""Each part of a reuse key's identity, as `run --reuse` names it when a stored result of the job was recorded under
another key, each compared by the digest the recording run kept of it (:data:`RECORDED_PARTS`). A run of an earlier
llmsweep kept none: then the first seven read back from a stored job and run (:func:`stored_parts`), and the
simulator's build from a simulated result's provenance (an llmsweep upgrade that changed the simulator is named as
such); the rest such a run records only inside the key's hash."""
STORED_PARTS = ("recipe_fingerprint", "image", "workload", "conc", "eval", "repeat", "measurement")
ABSENT_PARTS: dict[str, str] = {
    "local_files": "none of those paths existed where its run was planned, or an earlier llmsweep did not key what "
                   "they hold (a path in serve.args or serve.env, a PYTHONPATH of one folder), or its server ran in "
                   "its image and read the image's copy (a search-path folder its executor did not mount from this "
                   "host), so it does not say what they held when it was measured",
    "sample": "an earlier llmsweep did not key the sample a repeat draws",
    "copy": "the job was the first copy of its point on its server then, or an earlier llmsweep did not key which "
            "copy it is",
}
"""The parts a key holds only where they apply (a job that names no local path, a first repeat, a first copy keeps the
key it had before the part was keyed), each with why a recorded key may hold none: where a stored result's key is the
job's identity now without one of them, `run --reuse` and `--resume` say that this part alone differs, and why
(:func:`differing_parts`), not that one of the hidden parts does. An llmsweep upgrade that keys a new part re-measures
such a job once, saying so: standing on the stored result would give it a label its measurement did not earn (a
settings file edited since)."""


class ReuseKey(str):
    """A job's recorded reuse key — a `str` wherever one is used (looked up, compared, written to `run.json`) — that
    also knows its job and the digest of each part of its identity (:data:`KEY_PARTS`), so `run --reuse` can say,
    of a job no stored result matches, what differs from the newest stored result of the job
    (`results.store.Store.reusable`). `other_power`: the job's key under the other power gate (:data:`POWER_GATE`),
    which `run` looks up itself; `evaluates`: the job runs an eval, which `run` never reuses (and says so);
    `without`: for each part of :data:`ABSENT_PARTS` its identity holds, the identity's digest without it."""

    job_id: str
    parts: dict[str, str]
    other_power: str | None
    evaluates: bool
    without: dict[str, str]

    def __new__(cls, text: str, *, job_id: str, parts: dict[str, str], other_power: str | None = None,
                evaluates: bool = False, without: dict[str, str] | None = None) -> ReuseKey:
        made = super().__new__(cls, text)
        made.job_id, made.parts, made.other_power, made.evaluates = job_id, parts, other_power, evaluates
        made.without = without or {}
        return made


def identity_without(doc: Mapping[str, object]) -> dict[str, str]:
    """For each part of :data:`ABSENT_PARTS` a reuse identity (`reuse_doc`) holds, its digest without that part: the
    identity a key recorded before the part applied (or was keyed) holds (:attr:`ReuseKey.without`)."""
    return {name: _digest({k: v for k, v in doc.items() if k != name}) for name in ABSENT_PARTS if name in doc}


def part_digests(doc: Mapping[str, object]) -> dict[str, str]:
    """Each part of a reuse identity (`reuse_doc`) as a digest, for comparing part by part; a job the simulator does
    not run has no simulator part, one without local paths no local-files part."""
    return {name: _digest(doc[name]) for name in KEY_PARTS if doc.get(name) is not None}


def stored_parts(job_doc: Mapping[str, object], job_id: str, measurement: object,
                 simulator: str | None = None) -> dict[str, str]:
    """The digests of :data:`STORED_PARTS` of a stored job (its `job.json`, as the store keeps it) and its run's
    measurement identity, and of the simulator's build that served it where its result records one (`simulator`:
    `provenance.simulator.digest`, `sim.identity.simulator_digest`); {} when the stored job does not read as a job
    (an older shape)."""
    from pydantic import ValidationError

    try:
        job = Job.model_validate(job_doc)
    except ValidationError:
        return {}
    doc = reuse_doc(job, "", repeat=repeat_index(job_id))
    doc["measurement"] = measurement
    return {name: _digest(doc.get(name)) for name in STORED_PARTS} | (
        {"simulator": _digest(simulator)} if simulator is not None else {})


def differing_parts(key: ReuseKey, stored: Mapping[str, str], recorded: str | None = None,
                    recorded_parts: Mapping[str, str] | None = None) -> list[str]:
    """What differs between `key`'s identity and a stored job's, as :data:`KEY_PARTS` names it.

    Where the run that recorded the stored key recorded its parts too (`recorded_parts`: run.json's
    :data:`RECORDED_PARTS`, :func:`recorded_parts_of`), each part whose digest differs — one the recorded key holds
    none of said with why it may not (:data:`ABSENT_PARTS`), one this llmsweep does not key named as the record
    spells it — so an llmsweep upgrade that changed how a part is keyed names that part. Else (a run of an earlier
    llmsweep) it is inferred: the parts read back from the stored job (:func:`stored_parts`, the simulator's build
    included where the stored result records it) that differ; where none do, and the recorded identity
    (`recorded`) is `key`'s without a part of :data:`ABSENT_PARTS` (:attr:`ReuseKey.without`), that part, saying
    the recorded key holds none and why it may not; else the parts a run keeps only inside the hash that were not
    read back alike (one of them differs)."""
    if recorded_parts is not None:
        return _recorded_differences(key, recorded_parts)
    # (the simulator's build is compared only where the job runs on it now: a simulated result stood against a job
    # now served by a real engine differs in what is launched, not in the simulator's code)
    compared = (*STORED_PARTS, "simulator") if "simulator" in key.parts else STORED_PARTS
    named = [KEY_PARTS[n] for n in compared if n in stored and stored[n] != key.parts.get(n)]
    if named or not stored:
        return named
    absent = [n for n, digest in key.without.items() if digest == recorded]
    if absent:
        return [_held_none(n) for n in absent]
    hidden = [KEY_PARTS[n] for n in ("launch", "simulator", "gates", "local_files", "sample", "copy")
              if n in key.parts and n not in stored]  # a part read back alike (the simulator's build) is not it
    if len(hidden) <= 1:
        return hidden
    return ["one of what a run records only inside the key's hash: " + ", ".join(hidden[:-1]) + ", or " + hidden[-1]]


def _held_none(name: str) -> str:
    return f"{KEY_PARTS[name]}, which the key it was recorded under holds none of: {ABSENT_PARTS[name]}"


def _recorded_differences(key: ReuseKey, recorded: Mapping[str, str]) -> list[str]:
    """:func:`differing_parts` against the part digests recorded beside the stored key."""
    now = recorded_digests(key)
    out: list[str] = []
    for name in (*KEY_PARTS, *sorted(set(recorded) - set(KEY_PARTS))):
        if now.get(name) == recorded.get(name) or (name == "simulator" and name not in now):
            continue  # (a job no longer on the simulator: what it launches differs, not the simulator's code)
        if name not in KEY_PARTS:
            out.append(f"`{name}`, a part the key it was recorded under holds that this llmsweep does not key")
        elif name not in recorded and name in ABSENT_PARTS:
            out.append(_held_none(name))
        else:
            out.append(KEY_PARTS[name])
    # every part as recorded, the identity not: how the parts make one key changed (an llmsweep upgrade)
    return out or ["how llmsweep makes one key of its parts (each part is as the key it was recorded under holds it)"]


RECORDED_PARTS = "reuse_parts"
"""The run.json field (kept in the store's `runs.meta`) that records the parts of each reuse identity its
`reuse_keys` name: `{identity: {part: digest}}` (:func:`record_parts`), so that what differs from a stored key is
read, not inferred, after an upgrade that changed how a part is keyed (:func:`differing_parts`). A run of an earlier
llmsweep records none: what differs is inferred as before."""
PART_DIGEST_CHARS = 16
"""The hex digits of each part's digest that :data:`RECORDED_PARTS` keeps (a run.json of many jobs stays small)."""


def recorded_digests(key: ReuseKey) -> dict[str, str]:
    """`key`'s part digests as :data:`RECORDED_PARTS` records them."""
    return {name: digest[:PART_DIGEST_CHARS] for name, digest in key.parts.items()}


def record_parts(keys: Iterable[str], previous: object = None) -> dict[str, dict[str, str]]:
    """:data:`RECORDED_PARTS` of a run recording `keys`: each :class:`ReuseKey`'s parts, by its identity, and, for a
    key that is no :class:`ReuseKey` (one an earlier invocation recorded for a job whose result it still holds), the
    parts the run recorded for it before (`previous`: run.json's :data:`RECORDED_PARTS` then), where it did."""
    before = previous if isinstance(previous, dict) else {}
    out: dict[str, dict[str, str]] = {}
    for key in keys:
        base = split_key(key)[0]
        if isinstance(key, ReuseKey):
            out[base] = recorded_digests(key)
        elif isinstance(parts := before.get(base), dict) and base not in out:
            out[base] = parts
    return out


def recorded_parts_of(meta: object, key: str) -> dict[str, str] | None:
    """The part digests a run's record (its run.json, `runs.meta`) holds for the identity of `key`, one of its
    `reuse_keys`; None where it records none (a run of an earlier llmsweep) or they do not read."""
    parts = meta.get(RECORDED_PARTS) if isinstance(meta, dict) else None
    found = parts.get(split_key(key)[0]) if isinstance(parts, dict) else None
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        return None
    return {str(k): v for k, v in found.items()}


RECORDED_MEASUREMENT = "measurement"
"""The run.json field (kept in the store's `runs.meta`) beside `reuse_keys` that records the measurement identity its
jobs were measured under (`metrics.version.measurement_identity`: `m6-<metric table digest>`), the `measurement` part
of each key's identity in words, where the keys hold it only inside their hash."""


def recorded_measurement(meta: object) -> str | None:
    """The measurement identity a run's record (its run.json, `runs.meta`) says its jobs were measured under
    (:data:`RECORDED_MEASUREMENT`); None where it records none (a run of an llmsweep before it was recorded, an
    import) or it does not read."""
    said = meta.get(RECORDED_MEASUREMENT) if isinstance(meta, Mapping) else None
    return said if isinstance(said, str) and said else None


def key_differences(key: str, recorded: str, stored: Mapping[str, str], *, then: str = "stored",
                    recorded_parts: Mapping[str, str] | None = None) -> list[str]:
    """What differs between a job's reuse key now (`key`; a :class:`ReuseKey` knows its parts) and the key a result
    of it was recorded under (`recorded`), in one wording for `run --reuse` and `--resume`: each part of the context
    that differs, with both values (`then`: how the recorded one is named), then the parts of the identity
    (:func:`differing_parts`: against `recorded_parts`, what the recording run's record holds for its identity
    (:func:`recorded_parts_of`), else against `stored`, the recorded job's :func:`stored_parts`). [] where the keys
    agree."""
    base, context = split_key(key)
    recorded_base, recorded_context = split_key(recorded)
    diffs = [] if context is None or recorded_context is None else [
        f"{name} ({getattr(context, name) or '-'}, {then} {getattr(recorded_context, name) or '-'})"
        for name in CONTEXT_PARTS if getattr(context, name) != getattr(recorded_context, name)]
    if recorded_base != base and isinstance(key, ReuseKey):
        diffs += differing_parts(key, stored, recorded_base, recorded_parts)
    return diffs


def reuse_keys(jobs: list[Job], *, simulate: bool, live: bool = False,
               settings: LifecycleSettings | None = None, on_host: bool = False,
               image_mounts: Sequence[ImageMount] | None = None,
               other_power: dict[str, str] | None = None) -> dict[str, str]:
    """Every job's recorded reuse key (`<identity>/<source>/<clock>/<corpus>[/<served>]`), by job id; a job that
    cannot be rendered (not runnable) has none. `live`: simulated jobs serve the simulator in wall-clock time (`run
    --live`); `settings`: the run's, whose gates a job's verdict was judged by (`job_gates`); `on_host`: the run's
    executor serves real engines on this host whatever image a job names (the local executor); `image_mounts`: where
    it serves a job that names an image in a container of it (`execute.executor.Executor.image_mounts`: docker, a
    Slurm pyxis step), the host folders mounted there and where it sees them — a search-path folder of such a job under
    none of them is the image's, keyed as its text, one under a mount by what its source holds
    (:func:`local_files_digest`). `other_power`, when
    given, is filled with each job's key under the other `require_power` gate: what a stored result judged with (or
    without) power required was recorded under, which `run --reuse` may stand on by its power block
    (`POWER_GATE`)."""
    from llmsweep import engines
    from llmsweep.errors import LlmsweepError
    from llmsweep.execute.host_engine import host_engine_version
    from llmsweep.sim.identity import simulator_digest

    out: dict[str, str] = {}
    corpora: dict[str, str] = {}
    local: dict[str, str] = {}  # one digest per local model, draft model, tokenizer or engine-arg path
    versions: dict[tuple[str, ...], str] = {}  # one read per engine launcher and environment
    for job in jobs:
        if job.engine is None and not simulate:
            continue
        try:
            spec = engines.render(job, simulate=engines.runs_on_simulator(job.engine, simulate=simulate), port=0)
        except LlmsweepError:
            continue
        simulated = spec.engine == SIM.id
        context = reuse_context(job, simulated=simulated, live=live, corpora=corpora)
        if not simulated and on_host:
            probe = (spec.engine, *spec.argv[:3], spec.env.get("PATH", ""))
            if probe not in versions:
                versions[probe] = host_engine_version(spec) or UNREADABLE
            context = dataclasses.replace(context, served="host", engine=versions[probe])
        elif not simulated and job.image:
            context = dataclasses.replace(context, served="image")
        gates = job_gates(job, settings)
        keyed = functools.partial(reuse_doc, job, spec.fingerprint(), repeat=repeat_index(job.id),
                                  simulator=simulator_digest() if simulated else None,
                                  local_files=local_files_digest(
                                      job, local, image_mounts=image_mounts if context.served == "image" else None))
        doc = keyed(gates=gates)
        other = _digest(keyed(gates={**gates, POWER_GATE: not gates[POWER_GATE]})) + CONTEXT_SEP + context.render()
        out[job.id] = ReuseKey(_digest(doc) + CONTEXT_SEP + context.render(), job_id=job.id,
                               parts=part_digests(doc), other_power=other,
                               evaluates=bool(job.eval_only or job.run_eval), without=identity_without(doc))
        if other_power is not None:
            other_power[job.id] = other
    return out


SMALL_FILE_BYTES = 64 << 20
"""Files of a local path up to this size (configs, tokenizers, chat templates, llmsweep's import/synth records) count
by their bytes; larger ones (weights) by name, size and modification time, so a run reads no weights to key a job."""


def local_files_digest(job: Job, cache: dict[str, str] | None = None, *,
                       image_mounts: Sequence[ImageMount] | None = None) -> str | None:
    """A digest of what the job's local paths hold — `serve.model-path`, `serve.spec-decoding.draft-model`,
    `workload.tokenizer`, a `model` that is a local path, a path a value of `serve.args` names (:func:`arg_paths`:
    `--chat-template /path/t.jinja`, a drafter in `--speculative-config`) and one a variable of the server's
    environment names (:func:`env_paths`: `serve.env`, a multinode worker's `additional-settings`, e.g.
    `LMCACHE_CONFIG_FILE: /cfg/lmcache.yaml`, `NCCL_TOPO_FILE`, a folder of patches a `PYTHONPATH` names, alone or in
    a list; not another folder a value names whole, which the server writes into) — or None when it names none: the
    recipe names such a path, not its contents, so weights replaced at the same path (`model synth --force`, a new
    import, another drafter copied over the old one), a chat template or a settings file the server reads edited in
    place had kept the key, and `--reuse`/`--resume` stood on results of other weights, another template or other
    settings. A path that does not exist here (one inside the job's image) counts as the text the launch writes, as
    before. A file too large to read (`SMALL_FILE_BYTES`) counts by name, size and modification time; a folder by the
    files directly in it (a `PYTHONPATH` folder by every file under it: :data:`TREE_PATH_VARS`), reading at most
    `FOLDER_READ_BYTES` of them (the rest count as a large file does); a path that does not read counts as missing.
    `cache`: per path, for a run's many jobs; a process remembers each path's digest by its files' status too
    (:func:`_path_digest`). `image_mounts`: where the job's server runs in its image (docker, a Slurm pyxis step),
    the host folders mounted into it, each with the path it sees them at; a search-path folder
    (:data:`SEARCH_PATH_VARS`) under one of them is what that mount's source holds on this host (`PYTHONPATH:
    /opt/patches` with `-v /host/patches:/opt/patches` is keyed by /host/patches: the patches edited there had kept
    the key), one under none is the image's copy, which the image's reference keys, not this host's
    (`LD_LIBRARY_PATH: /usr/local/cuda/lib64`, `PATH: /usr/local/bin` exist here too: a host package upgrade had
    moved every key though the server ran the same code), so it counts as its text; None where the server reads this
    host's files."""
    serve = job.serve
    spec = serve.spec_decoding if serve is not None else None
    words = [(name, read) for name, w in env_path_words(job)
             for read in ([w] if image_mounts is None or name not in SEARCH_PATH_VARS
                          else _host_copies(w, image_mounts, tree=name in TREE_PATH_VARS))]
    named = [serve.model_path if serve is not None else None, spec.draft_model if spec is not None else None,
             getattr(job.workload, "tokenizer", None), job.model, *arg_paths(job), *(w for _, w in words)]
    trees = {path for name, w in words if name in TREE_PATH_VARS and (path := _existing(w)) is not None}
    paths = sorted({path for p in named if p and (path := _existing(p)) is not None})
    if not paths:
        return None
    cache = cache if cache is not None else {}
    parts = []
    for path in paths:
        tree = path in trees
        slot = f"{path}\0tree" if tree else path
        if slot not in cache:
            cache[slot] = _path_digest(Path(path), tree=tree)
        parts.append(f"{path}={cache[slot]}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _host_copies(word: str, mounts: Sequence[ImageMount], *, tree: bool) -> list[str]:
    """The host folders whose files a server in its image reads in the search-path folder `word`: the folder the
    mount whose target holds it maps it to (`execute.base.host_path_of`; none where no mount does: the image's own
    folder), and, where the folder counts as a tree (:data:`TREE_PATH_VARS`), each folder mounted inside it
    (`execute.base.mounts_under`)."""
    from llmsweep.execute.base import host_path_of, mounts_under

    host = host_path_of(word, mounts)
    return [*([str(host)] if host is not None else []), *(str(p) for p in (mounts_under(word, mounts) if tree else []))]


def arg_paths(job: Job) -> list[str]:
    """The words of the job's `serve.args` that name a path — a flag's value (`--chat-template: /t.jinja`), one in
    its name (`--chat-template=/t.jinja: true`), an item of a list, a string anywhere in a mapping (vLLM's
    `--speculative-config: {model: /drafter}`) — whether or not it exists here: it holds a `/` or begins with `~`
    (`./chat.jinja` for one in the directory `run` starts in). A bare word (`auto`, `fp8`, a served model name) is
    taken for no path: a file or folder of that name where `run` happens to start would move the key."""
    if job.serve is None:
        return []
    words: list[str] = []

    def collect(value: object) -> None:
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)

    for flag, value in job.serve.args.items():
        _, inline, written = flag.partition("=")
        collect(written if inline else value)
    return [w for w in words if _names_path(w)]


SEARCH_PATH_VARS = frozenset({"PYTHONPATH", "LD_LIBRARY_PATH", "PATH"})
"""Environment variables whose value is a search path: folders the server's interpreter, loader or shell looks for
the code it runs in (a folder of patches, a library's build). Each of their folders is keyed by what it holds
(:func:`env_paths`), one alone as one of a list: it is no folder the server writes into — where the server reads this
host's copy (:func:`local_files_digest`'s `image_mounts`: a server in its job's image reads the image's)."""
TREE_PATH_VARS = frozenset({"PYTHONPATH"})
"""Search paths whose folders are keyed by every file under them (:func:`_path_digest`'s `tree`), not only the files
directly in them: patches kept as packages (`PYTHONPATH: /opt/patches` holding `vllm/...`, a `sitecustomize.py`
beside a package folder) and a `pip install --target` folder hold the code they run in subfolders, and one edited
there had kept the key. Byte-code (`__pycache__`, `*.pyc`) and dot-folders (`.git`) are left out: the interpreter
writes the first as it imports, and neither is the code it runs. `PATH` and `LD_LIBRARY_PATH` are looked in at their
top level only (`/usr/local/cuda/lib64`, `/usr/bin`), so their folders stay keyed by the files directly in them."""


def env_paths(job: Job) -> list[str]:
    """The values of the job's server environment as its recipe writes them that name a path the server reads, whether
    or not it exists here: `serve.env` (after the arm's overrides) and each multinode worker's InferenceX
    `additional-settings` (`NAME=VALUE`, passed to its launch as environment: `engines.base.settings_env`). A value
    names one by the rule of :func:`arg_paths` (a `/` in it, or a leading `~`: `./lmcache.yaml` for one in the
    directory `run` starts in): whole where it is no folder here (`LMCACHE_CONFIG_FILE: /cfg/lmcache.yaml`), and, as
    the environment writes a list of paths, each of its `:`-separated items, a file or a folder (`PYTHONPATH:
    /opt/a:/opt/b`, a folder of patches the server imports); a search path (:data:`SEARCH_PATH_VARS`) is such a list
    of one folder too (`PYTHONPATH: /opt/patches`: what it holds changes what runs, as in a list of two). Any other
    folder a value names whole (`TMPDIR`, `TORCHINDUCTOR_CACHE_DIR`, a log folder) is one the server writes into as
    it runs: keyed by the files in it, a cache file appearing moved the key, so `--resume` measured finished jobs
    again and `--reuse` never matched; it counts as its text. A secret's value is never written (`serve.secret-env`):
    it names nothing here."""
    return list(dict.fromkeys(word for _, word in env_path_words(job)))


def env_path_words(job: Job) -> list[tuple[str, str]]:
    """(variable, path) of each path :func:`env_paths` names, in the order the environment writes them: which variable
    names a folder says how it is keyed (:data:`TREE_PATH_VARS`, :data:`SEARCH_PATH_VARS`)."""
    from llmsweep.engines.base import settings_env

    named = [(k, v) for k, v in job.serve.env.items() if v is not None] if job.serve is not None else []
    for worker in (job.prefill, job.decode):
        if worker is not None:
            named += settings_env(worker).items()
    return [(name, word) for name, value in named
            for word in (value.split(os.pathsep) if os.pathsep in value or name in SEARCH_PATH_VARS
                         else _not_a_folder(value)) if _names_path(word)]


def _not_a_folder(value: str) -> list[str]:
    """`value` alone, where it names no folder here ([] where it does)."""
    where = _existing(value)
    return [] if where is not None and Path(where).is_dir() else [value]


def _names_path(word: str) -> bool:
    """Whether a word a recipe writes may name a local path: it holds a `/` or begins with `~`. A bare word (`auto`,
    `fp8`, a served model name) names none: a file or folder of that name where `run` happens to start would move the
    key."""
    return "/" in word or word.startswith("~")


def _existing(text: str) -> str | None:
    """`text` as a local path (`~` expanded) when something exists there; None when nothing does or it cannot name
    one (an inline chat template holding a `/`, a word longer than a file name may be, an unknown `~user`)."""
    try:
        path = Path(text).expanduser()
        return str(path) if path.exists() else None
    except (OSError, ValueError, RuntimeError):
        return None


FOLDER_READ_BYTES = 64 << 20
"""The most bytes keying one folder reads: its small files (`SMALL_FILE_BYTES`) count by their bytes, in name order,
while they fit in what is left of it; the rest by name, size and modification time, as a large file does. A folder of
patches, configs or a tokenizer is read whole (and keeps the key it had); a system folder a search path names
(`PATH: /usr/local/bin:/usr/bin`, an `LD_LIBRARY_PATH` of libraries: hundreds of megabytes) costs at most this, where
every job's key read it whole. So the key of a folder holding more than this depends on when the files past it were
written there, not only on what they hold: two hosts with byte-identical copies (an `LD_LIBRARY_PATH` folder of many
small libraries, a large `PYTHONPATH` tree installed on each), or one reinstalled in place, mostly key it apart —
their modification times differ unless the copy kept them —, so `run --reuse` across hosts, and keys a CI collected
(`ci matrix`, a `--ci-store`), stop matching for jobs that name such a folder: a miss (the job is measured again),
never a stale hit, which these files' content would need to change without their size or time."""

RACY_NS = 2 * 10**9
"""How recent (ns) a file's modification or status change may be for keying to remember its folder's digest by the
files' status (:func:`_path_digest`): a file the file system's coarse clock stamps within this of now may be written
again under the same stamps, so a folder holding one is read again each time."""

_Stat = tuple[str, int, int, int, int, int]
_DIGESTS: dict[tuple[str, bool], tuple[tuple[_Stat, ...], str]] = {}
"""Per process, by path (and whether keyed as a tree): the status of the files :func:`_path_digest` keyed there and
the digest they gave."""

SKIPPED_IN_TREE = ("__pycache__",)
"""Folders a tree (:data:`TREE_PATH_VARS`) is keyed without, beside dot-folders; files ending `.pyc` are left out
too: byte-code the interpreter writes as it imports, not the code it runs."""


def _tree_files(root: Path) -> tuple[list[tuple[str, Path, os.stat_result]], list[str]]:
    """Every file under `root` as (its path from `root`, `/`-separated; the path; its status), in the order of those
    paths; and the subfolders that could not be listed. A symbolic link to a folder is followed once: a link back to
    a folder above it (a loop) or to one already walked is not walked again."""
    files: list[tuple[str, Path, os.stat_result]] = []
    unlisted: list[str] = []
    seen: set[tuple[int, int]] = set()

    def walk(folder: Path, prefix: str) -> None:
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                return
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(folder.iterdir(), key=lambda e: os.fsencode(e.name))
        except OSError:
            if prefix:
                unlisted.append(prefix)
                return
            raise
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir():
                    if not entry.name.startswith(".") and entry.name not in SKIPPED_IN_TREE:
                        walk(entry, rel + "/")
                elif entry.is_file() and not entry.name.endswith(".pyc"):
                    files.append((rel, entry, entry.stat()))
            except OSError:
                unlisted.append(rel)

    walk(root, "")
    files.sort(key=lambda f: os.fsencode(f[0]))
    return files, unlisted


def _path_digest(path: Path, *, tree: bool = False) -> str:
    """What a local path holds (a file, or the files directly in a folder: :func:`local_files_digest`; with `tree`,
    every file under the folder but byte-code and dot-folders: :data:`TREE_PATH_VARS`), remembered per process by
    the status of its files (name, size, modification and status-change time, inode, device), for the path and any
    other name of it (`/bin` for `/usr/bin`): a file edited in place, even one given its old modification time back,
    has a new status-change time, and is read again."""
    files: list[tuple[str, Path, os.stat_result]] = []
    unlisted: list[str] = []
    error: OSError | None = None
    folder = False
    try:
        folder = path.is_dir()
        if folder and tree:
            files, unlisted = _tree_files(path)
        else:
            for f in sorted(f for f in path.iterdir() if f.is_file()) if folder else [path]:
                files.append((f.name, f, f.stat()))
    except OSError as exc:
        error = exc
    stats = tuple((name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev) for name, _, st in files)
    stats += tuple((name, -1, 0, 0, 0, 0) for name in unlisted)
    where = (os.path.realpath(path), tree and folder)
    if error is None and (memo := _DIGESTS.get(where)) is not None and memo[0] == stats:
        return memo[1]
    h = hashlib.sha256()
    left = FOLDER_READ_BYTES if folder else SMALL_FILE_BYTES
    try:
        for name, f, st in files:
            # the name as the file system holds it: one that is not UTF-8 (a byte Python escapes) is no error
            h.update(os.fsencode(name) + f"\0{st.st_size}\0".encode())
            if st.st_size <= min(SMALL_FILE_BYTES, left):
                h.update(f.read_bytes())
                left -= st.st_size
            else:
                h.update(str(st.st_mtime_ns).encode())
        for name in unlisted:  # a subfolder that does not list: named, so the files beside it still count
            h.update(os.fsencode(name) + b"\0unreadable\0")
    except OSError as exc:
        error = exc
    if error is not None:
        h.update(f"unreadable: {error.strerror}".encode())
        return h.hexdigest()
    digest = h.hexdigest()
    settled = time.time_ns() - RACY_NS
    if not unlisted and all(mtime < settled and ctime < settled for _, _, mtime, ctime, _, _ in stats):
        _DIGESTS[where] = (stats, digest)
    return digest


POWER_GATE = "require_power"
"""The gate of a reuse key that says whether the job's verdict required valid power (`job_gates`). A stored result
judged under the other value is the same measurement, judged by a gate more or less: `run --reuse` stands a job that
requires power on one judged without that requirement when its own power block is valid, and a job that does not
require it on one judged with it (its verdict passed the stricter gate)."""


def job_gates(job: Job, settings: LifecycleSettings | None) -> dict[str, object]:
    """The run's settings that judge this job's verdict: whether power is required of it (`run --require-power`, the
    recipe's `require-power`: a result without power is refused where it is), and, for a job that pins its acceptance
    length, the read-back gate's settings (`--al-tolerance`); and the client's whole-request timeout where it is not
    the default (`--request-timeout`: which requests fail, so whether the point passes its error gate)."""
    from llmsweep.execute.lifecycle import LifecycleSettings

    settings = settings if settings is not None else LifecycleSettings()
    gates: dict[str, object] = {POWER_GATE: settings.power.required([job])}
    if job.acceptance is not None:
        gates["readback"] = settings.readback.model_dump(mode="json")
    if settings.request_timeout_s != LifecycleSettings.model_fields["request_timeout_s"].default:
        gates["request_timeout_s"] = settings.request_timeout_s  # keys of default runs unchanged
    return gates


def reuse_context(job: Job, *, simulated: bool, live: bool, corpora: dict[str, str] | None = None) -> ReuseContext:
    """The context a run of `job` would produce: simulated jobs run in virtual time unless `live`, real engines in
    wall-clock time; the corpus is read from the job's external trace source now (`corpora` caches it per source)."""
    return ReuseContext(run_source(simulated), run_clock(simulated=simulated, live=live),
                        corpus_now(job, corpora if corpora is not None else {}))


def corpus_now(job: Job, cache: dict[str, str]) -> str:
    """The short digest of the corpus `job` would replay from its external trace source, as its summary will record
    it (`identity.corpus`); a Mooncake trace's file digest; "" for a job whose config fixes its prompts (fixed-length,
    synthetic traces); UNREADABLE when the source cannot be read (the run refuses the job then)."""
    from llmsweep.plan.point import corpus_ref

    ref = corpus_ref(job)
    if ref is None:
        return ""
    if (slot := ref.key) not in cache:
        try:
            cache[slot] = _file_digest(Path(ref.source)) if ref.mooncake else _replay_digest(ref.source, ref.revision)
        except Exception:  # an unreadable source is refused with its reason later (`run`); never reused here
            cache[slot] = UNREADABLE
    return cache[slot]


def _file_digest(path: Path) -> str:
    """A trace file's digest as a summary's `identity.corpus` keeps it (`workload.traces.digest.file_digest`,
    shortened: what a Mooncake replay records)."""
    from llmsweep.results.identity import short_digest
    from llmsweep.workload.traces.digest import file_digest

    return short_digest(file_digest(path))


def _replay_digest(source: str, revision: str | None = None) -> str:
    """The short digest agentic replay records for `source` at `revision` (its summary's `identity.corpus`)."""
    from llmsweep.results.identity import short_digest
    from llmsweep.workload.agentic import replay_corpus_digest

    return short_digest(replay_corpus_digest(source, revision=revision))
