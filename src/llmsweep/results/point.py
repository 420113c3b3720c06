"""ResultPoint: one measured (or simulated, or predicted) operating point, the unit every consumer works with.

A point is built either from a job folder of a run directory or from a stored/imported row; frontiers, comparisons
and the report never care which.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmsweep.catalog.images import parse_image
from llmsweep.client.files import RECORDS_FILE
from llmsweep.errors import ConfigError, ResultError
from llmsweep.metrics.model import VIRTUAL, EvalBlock, Hardware, PowerCost, Summary
from llmsweep.metrics.registry import HOT_NAMES
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.extract import INVALID_VERDICTS, extract_hot
from llmsweep.results.identity import (
    POINT_FIELDS,
    Measurement,
    PointIdentity,
    get_field,
    gpus_of,
    identity_from_job,
    measurement_of,
)
from llmsweep.results.rundir import JobArtifacts, RunDir
from llmsweep.words import count_of

_SIMULATE = _flag("simulate")


def result_id_for(run_id: str, job_id: str) -> str:
    """Stable, short result id: the same run and job always get the same id, so ingest is idempotent."""
    return "r" + hashlib.sha1(f"{run_id}/{job_id}".encode()).hexdigest()[:11]


@dataclass(frozen=True, slots=True)
class ReusedBy:
    """The run a stored result is read as part of because `run --reuse` stood one of its jobs on it (`run.json:
    reused`), and that job's id there: the result is still the measuring run's (its ids, verdict and figures), and
    it stands for a point of this run too."""

    run_id: str
    job_id: str


@dataclass(frozen=True, slots=True)
class ResultPoint:
    """One result with its identity, hot metrics, validity and where its raw artifacts are (if anywhere)."""

    result_id: str
    run_id: str
    job_id: str
    identity: PointIdentity
    source: str
    verdict: str
    metrics: dict[str, float | None]
    gpus: int
    origin: str = "llmsweep"
    """Who produced it: `llmsweep` for our runs, `inferencex` (or a file name) for imported rows."""
    reasons: tuple[str, ...] = ()
    num_requests: int | None = None
    num_successful: int | None = None
    job: dict[str, Any] = field(default_factory=dict)
    summary: Summary | None = None
    """Our summary of the result; None for a row imported from elsewhere (see `imported`)."""
    imported: dict[str, Any] = field(default_factory=dict)
    """The row as it was published, for a result imported from another tool (InferenceX); empty for ours."""
    provenance: dict[str, Any] = field(default_factory=dict)
    artifact_dir: Path | None = None
    reused_by: ReusedBy | None = None
    """Set where the point is read as part of a run that `run --reuse` stood a job on it (`stood_on_by`: its
    dashboard, its frontier), None where it is read as the result of the run that measured it."""

    @property
    def run_in_view(self) -> str:
        """The run the point is read as part of: the run that stood a job on it (`reused_by`), else its own."""
        return self.reused_by.run_id if self.reused_by is not None else self.run_id

    @property
    def job_in_view(self) -> str:
        """The job of `run_in_view` the point stands for (the reusing run's job, or its own)."""
        return self.reused_by.job_id if self.reused_by is not None else self.job_id

    def stood_on_by(self, run_id: str, job_id: str) -> ResultPoint:
        """This stored result read as the point `run --reuse` stood job `job_id` of run `run_id` on."""
        return replace(self, reused_by=ReusedBy(run_id, job_id))

    @property
    def valid(self) -> bool:
        return self.verdict not in INVALID_VERDICTS

    @property
    def eval(self) -> EvalBlock | None:
        """The accuracy eval the job ran (eval-only, or after its throughput point), if any."""
        return self.summary.eval if self.summary is not None else None

    @property
    def eval_only(self) -> bool:
        """An eval-only result: an accuracy score, no throughput point (kept out of frontiers and plots). An eval-only
        job's, or an eval imported from eval rows (its job record says `eval-only`: the rows carry no throughput
        point, whatever kind of job ran the eval, which its eval's `mode` keeps)."""
        return self.eval is not None and (self.eval.mode == "eval-only" or get_field(self.job, "eval-only") is True)

    @property
    def power_source(self) -> str | None:
        """Whether the point's power figures (`MetricDef.power`) were measured on its GPUs (`measured`) or are the
        simulator's power model's (`simulated`), as its summary's power block says; an imported row of our export, as
        the export's `llmsweep.power.source` said. None where neither says (no power block, a foreign row)."""
        if self.summary is not None:
            return self.summary.power.source if self.summary.power is not None else None
        said = self.imported.get("llmsweep")
        power = said.get("power") if isinstance(said, Mapping) else None
        source = power.get("source") if isinstance(power, Mapping) else None
        return source if isinstance(source, str) else None

    @property
    def cost(self) -> PowerCost | None:
        """The assumed price its cost figures (`MetricDef.assumed`) were figured at, with its source and date: its
        summary's `power.cost`; an imported row of our export, the export's `llmsweep.power.cost`. None where neither
        says (no cost block, a foreign row)."""
        if self.summary is not None:
            return self.summary.power.cost if self.summary.power is not None else None
        said = self.imported.get("llmsweep")
        power = said.get("power") if isinstance(said, Mapping) else None
        cost = power.get("cost") if isinstance(power, Mapping) else None
        try:
            return PowerCost.model_validate(cost) if isinstance(cost, Mapping) else None
        except ValidationError:
            return None

    @property
    def records_path(self) -> Path | None:
        return self.artifact_dir / RECORDS_FILE if self.artifact_dir else None

    def metric(self, name: str) -> float | None:
        return self.metrics.get(name)

    @property
    def measurement(self) -> Measurement | None:
        """The load and workload this result measured (`identity.Measurement`), from its summary; None when the
        summary does not record them (an imported row, a summary without client options)."""
        return measurement_of(self.summary)

    @property
    def clock(self) -> str | None:
        """The clock the result ran on, as its provenance records it: `virtual` (the simulator core, in-process) or
        `wall`; None when not recorded (an imported row)."""
        clock = self.provenance.get("clock")
        return str(clock) if clock else None

    @property
    def engine_build(self) -> str:
        """The engine version the server reported when it served this result (its `/version`, as the launch
        provenance records it: `engine_version_reported`); "" where it was not read (a simulated or imported point,
        a server that reports none)."""
        return _launch(self, "engine_version_reported")

    @property
    def image_digest(self) -> str:
        """The registry digest of the image that served it (`sha256:...`), "" where none was read."""
        return _launch(self, "image_digest")

    @property
    def image_digest_short(self) -> str:
        """:attr:`image_digest` as a label names it: its first 12 hex digits."""
        return self.image_digest.removeprefix("sha256:")[:12]

    @property
    def served_image(self) -> str:
        """The image the server ran in, as its launcher said (the launch's `image`); "" where it ran on the host (the
        local executor, the simulator) or the result records no launch."""
        return _launch(self, "image")

    @property
    def simulator_build(self) -> str:
        """The simulator build that computed a simulated result: the digest of its code and catalogs its provenance
        records (`provenance.simulator.digest`, `sim.identity.simulator_digest`; in virtual time this process's, live
        the server's `/version`), as a server's build serves a wall-clock result. A result recorded before the digest
        was kept falls back to its release: in virtual time its provenance's `llmsweep_version` (the live simulator's
        release is its `engine_build`), so it is never the same build as a digest's. "" for a result of no
        simulator, or one that records neither."""
        said = self.provenance.get("simulator")
        digest = said.get("digest") if isinstance(said, Mapping) else None
        if isinstance(digest, str) and digest:
            return digest
        return str(self.provenance.get("llmsweep_version") or "") if self.clock == VIRTUAL else ""

    @property
    def served_gpus(self) -> int | None:
        """The GPUs its server ran on, as its provenance's `hardware.gpus` records them: 0 where it ran on none (a
        real engine's CPU rehearsal), the job's GPUs otherwise; None where the result does not say (an imported row,
        a summary without that block). :attr:`gpus` stays the count per-GPU figures divide by."""
        hardware = self.summary.provenance.hardware if self.summary is not None else None
        return hardware.gpus if isinstance(hardware, Hardware) else None

    @property
    def power_limits_w(self) -> tuple[float, ...] | None:
        """The enforced power limits of the server's GPUs when it was ready, as the driver said them (sorted, one per
        distinct value); None where none was read (a simulated or imported point, a host without nvidia-smi or
        amd-smi)."""
        hardware = self.summary.provenance.hardware if self.summary is not None else None
        limits = hardware.power_limits_w if isinstance(hardware, Hardware) else None
        return tuple(sorted(set(limits))) if limits else None

    @property
    def configuration(self) -> str:
        """What ran to earn this point beyond its identity: the recipe fingerprint, the rendered launch's fingerprint
        (engine args, env, files), the engine version and image digest read back from what served it (a simulated
        result's simulator build: `simulator_build`), the source and the clock its provenance records, and what it
        measured (the
        window, request and warm-up counts, the resolved workload: `measurement`). Two results of one point identity
        are repeats of one configuration only when these are equal (but for a result of a release without its image
        digest: `configuration_keys`); "" when the point does not record its launch or
        its measurement (an imported row, a summary without provenance or client options), so it is a repeat of
        nothing. `configurations` groups results by it, `telling_apart` names what differs between groups."""
        return self.configuration_key()

    def configuration_key(self, *, sources_apart: bool = True, digest: bool = True) -> str:
        """:attr:`configuration`; without `sources_apart`, its source left out (a frontier asked to mix sources
        draws a simulated point and a measured one of one launch in one series, as it was asked); without `digest`,
        its image digest left out (its release's configuration: `configuration_keys`)."""
        fingerprint = _launch(self, "fingerprint")
        measurement = self.measurement
        if not fingerprint or measurement is None:
            return ""
        # the build that served it, as read back (the engine's own /version, the image's registry digest): a moving
        # tag (a nightly, `latest`) renders one launch fingerprint over several engine versions, not repeats; a
        # simulated result's simulator build (its digest, else in virtual time its release), which one launch of
        # `sim serve` names whatever the build
        read = ("engine_version_reported", "image_digest") if digest else ("engine_version_reported",)
        built = "|".join(f"{k}={_launch(self, k)}" for k in read)
        if simulator := self.simulator_build:
            built += f"|simulator={simulator}"
        source = f"|source={self.source}" if sources_apart else ""
        return (f"recipe={_recipe_fingerprint(self)}|launch={fingerprint}|{built}{source}|clock={self.clock or ''}"
                f"|{measurement.key()}")


def configuration_keys(points: Sequence[ResultPoint], *, sources_apart: bool = True) -> list[str]:
    """Each result's configuration among `points`, in their order: its `ResultPoint.configuration_key`, except for a
    result whose server reported its engine version but whose image's registry digest was not read (a Slurm/pyxis
    launch, a locally built image, a release before digests were read) in an image whose reference cannot move (a
    release tag, a dated or commit tag, `@sha256:`: `catalog.images.ImageRef.moving`, `pinned_image`): it cannot be
    told apart from a result of its release that read one, so where `points` hold results of one digest of that
    release (the rest of the configuration alike), it is of theirs — the same release, its build unknown
    (`build_unknown` names it). Beside two digests of its release it is of neither: which build served it is not
    known. Under a moving tag (a nightly, `latest`, `dev`: one tag and one reported version span builds for days) or
    on the host it stays a configuration of its own: the digest is what tells those builds apart."""
    own = [p.configuration_key(sources_apart=sources_apart) for p in points]
    builds: dict[str, set[str]] = {}  # a release's configuration -> the configurations of its digests
    for p, key in zip(points, own, strict=True):
        if key and p.image_digest:
            builds.setdefault(p.configuration_key(sources_apart=sources_apart, digest=False), set()).add(key)
    out = []
    for p, key in zip(points, own, strict=True):
        if key and builds and p.engine_build and not p.image_digest:
            digests = builds.get(p.configuration_key(sources_apart=sources_apart, digest=False), set())
            key = next(iter(digests)) if len(digests) == 1 and pinned_image(p.served_image) else key
        out.append(key)
    return out


def pinned_image(reference: str) -> bool:
    """Whether an image reference a launch recorded names one build (`catalog.images.ImageRef.moving` is False: a
    release tag, a dated or commit tag, a digest); False for a moving tag (a nightly, `latest`, `dev`, a tag without
    a version), a reference that does not parse, or none (a server on the host)."""
    if not reference:
        return False
    try:
        return not parse_image(reference).moving
    except ConfigError:
        return False


def build_unknown(points: Sequence[ResultPoint], *, sources_apart: bool = True) -> list[ResultPoint]:
    """The results among `points` that `configuration_keys` counts as of another result's image digest: their
    release's, recorded without a digest (the same release, the build unknown)."""
    keys = configuration_keys(points, sources_apart=sources_apart)
    return [p for p, key in zip(points, keys, strict=True)
            if key != p.configuration_key(sources_apart=sources_apart)]


def configurations(points: Iterable[ResultPoint], *, sources_apart: bool = True) -> dict[str, list[ResultPoint]]:
    """The results grouped by configuration (`configuration_keys`: a result of a release that read no image digest,
    under a reference that does not move, is of the one digest of it the others read), in the order of each one's
    first result; those that record none ("") are one group. Two groups at one point identity are not repeats of one
    measurement: `compare` pools neither, a frontier draws them as two series (`results.frontier`)."""
    points = list(points)
    groups: dict[str, list[ResultPoint]] = {}
    for p, key in zip(points, configuration_keys(points, sources_apart=sources_apart), strict=True):
        groups.setdefault(key, []).append(p)
    return groups


@dataclass(frozen=True, slots=True)
class ConfigurationFacet:
    """One thing that may tell two configurations of a point apart, as a person reads it: `name` and `plural` for a
    label (`recipe key dsr1-mtp3`) or a list (`recipe keys dsr1-mtp3, dsr1-mtp1`), `of` its value for a result
    ("" when the result does not record it)."""

    name: str
    plural: str
    of: Callable[[ResultPoint], str]


def _launch(point: ResultPoint, key: str) -> str:
    """A field of the launch the point's provenance records ("" when it records none)."""
    launch = point.provenance.get("launch")
    return str(launch.get(key) or "") if isinstance(launch, Mapping) else ""


def _recipe_fingerprint(point: ResultPoint) -> str:
    """The fingerprint of the recipe the point's job came from, as its provenance or job records it."""
    job = point.provenance.get("job")
    recipe = (job.get("recipe_fingerprint") if isinstance(job, Mapping) else None) \
        or point.provenance.get("recipe_fingerprint") or get_field(point.job, "recipe_fingerprint")
    return str(recipe or "")


CONFIGURATION_FACETS: tuple[ConfigurationFacet, ...] = (
    ConfigurationFacet("recipe key", "recipe keys",
                       lambda p: str(p.provenance.get("recipe_key") or get_field(p.job, "recipe_key") or "")),
    ConfigurationFacet("run", "runs", lambda p: p.run_id),
    ConfigurationFacet("engine", "engine versions", lambda p: p.engine_build),
    ConfigurationFacet("image digest", "image digests", lambda p: p.image_digest_short),
    ConfigurationFacet("simulator", "simulator builds", lambda p: p.simulator_build),
    ConfigurationFacet("clock", "clocks", lambda p: p.clock or ""),
    ConfigurationFacet("source", "sources", lambda p: p.source),
    ConfigurationFacet("recipe", "recipe fingerprints", lambda p: _recipe_fingerprint(p)[:12]),
    ConfigurationFacet("measurement", "measurements", lambda p: m.key() if (m := p.measurement) is not None else ""),
    ConfigurationFacet("launch", "launch fingerprints", lambda p: _launch(p, "fingerprint")[:12]),
    ConfigurationFacet("job", "jobs", lambda p: p.job_id),
)
"""What may tell configurations apart, in the order a reader names them by: the recipe key (two keys of one point:
MTP K=3 and K=1), the run (a result `run --reuse` stood on, measured elsewhere), what served it, how it was timed,
then the fingerprints; the job id last, which always differs."""


def telling_apart(*group_sets: Sequence[Sequence[ResultPoint]]) -> ConfigurationFacet | None:
    """The first facet (`CONFIGURATION_FACETS`) that names each group (of one configuration, `configurations`) by
    one value of its own, no two groups of a set alike (in every set given: a series split at each of its points that
    holds two configurations): what a reader is told differs between them. None when none does."""

    def tells(facet: ConfigurationFacet, groups: Sequence[Sequence[ResultPoint]]) -> bool:
        values = [{facet.of(p) for p in group} for group in groups]
        return all(len(v) == 1 and "" not in v for v in values) and len({next(iter(v)) for v in values}) == len(groups)

    return next((f for f in CONFIGURATION_FACETS if all(tells(f, groups) for groups in group_sets)), None)


def check_topology(job_id: str, identity: PointIdentity, summary: Summary, gpus: int | None = None) -> None:
    """No result carries a disaggregated identity with an aggregated topology: a disaggregated or multinode job's
    summary must say which deployment served it (`deployment`, read back from what ran, on the job's `gpus`), and an
    aggregated job's must not claim one. A ResultError names the job otherwise."""
    deployment = summary.deployment
    deployed = deployment is not None and deployment.disaggregated
    if (identity.disagg or identity.workers) and not deployed:
        raise ResultError(
            f"job {job_id} is a disaggregated prefill/decode job ({identity.workers or 'disagg: true'}) but its "
            "summary records no disaggregated deployment: it would be stored as an aggregated server's result under "
            "the disaggregated job's identity",
            fix=f"re-run it where its roles are launched as roles (`llmsweep run {_SIMULATE}` runs them in virtual "
                "time); never relabel an aggregated result")
    if deployed and not (identity.disagg or identity.workers):
        raise ResultError(f"job {job_id} is an aggregated job but its summary records a disaggregated deployment",
                          fix="re-summarise the job folder (`llmsweep summarize`) or re-run it")
    if deployed and gpus is not None and deployment is not None and deployment.gpus not in (None, gpus):
        raise ResultError(f"job {job_id} plans {count_of(gpus, 'GPU')} but the deployment that ran had "
                          f"{deployment.gpus}",
                          fix="re-run the job: a result is stored only under the topology that earned it")


def point_from_job(run_id: str, art: JobArtifacts) -> ResultPoint | None:
    """The point of one job folder, or None when the job has no summary yet."""
    if art.summary is None:
        return None
    identity = identity_from_job(art.job, art.summary)
    check_topology(art.job_id, identity, art.summary, gpus_of(art.job, identity))
    ex = extract_hot(art.summary)
    provenance = dict(ex.provenance)
    for key in ("recipe_fingerprint", "recipe_key"):
        value = get_field(art.job, key)
        if value is not None and key not in provenance:
            provenance[key] = value
    return ResultPoint(
        result_id=result_id_for(run_id, art.job_id),
        run_id=run_id,
        job_id=art.job_id,
        identity=identity,
        source=ex.source,
        verdict=ex.verdict,
        reasons=ex.reasons,
        metrics=ex.metrics,
        gpus=gpus_of(art.job, identity),
        num_requests=ex.num_requests,
        num_successful=ex.num_successful,
        job=art.job,
        summary=art.summary,
        provenance=provenance,
        artifact_dir=art.dir,
    )


def stood_on(run_id: str, reused: Mapping[str, ResultPoint]) -> dict[str, ResultPoint]:
    """The stored results `run --reuse` stood run `run_id`'s jobs on (job id -> result, `Store.reused_points`), each
    read as that run's point (`ResultPoint.stood_on_by`): a repeat of its own point beside the repeats it measured
    (`results.repeats`)."""
    return {job: p.stood_on_by(run_id, job) for job, p in reused.items()}


def points_from_run(run: RunDir) -> list[ResultPoint]:
    """Every job of the run that has a summary, in job-folder order."""
    return [p for p in (point_from_job(run.run_id, art) for art in run.jobs) if p is not None]


_ROW_HEAD = ("result_id", "run_id", "job_id", "source", "origin", "verdict", "reasons", "gpus", "topology", "series")
EVAL_COLUMNS = ("eval_mode", "eval_task", "eval_score", "eval_score_name", "eval_score_stderr", "eval_verdict",
                "eval_reasons")
"""A result's eval in its flat row (None for a result without one), named as `run --json` names them: the kind of job
that ran it, the task, the headline score (strict match, else accuracy) with its name and stderr, and the eval's own
verdict and reasons (a run-eval result's `verdict` is its throughput point's)."""
RESULT_COLUMNS: tuple[str, ...] = (*_ROW_HEAD, *POINT_FIELDS, *HOT_NAMES, *EVAL_COLUMNS)
"""The columns of a result's flat row (`describe`), in order: the one definition `results list --json`, `results
show` and the CSV export read."""


def describe(point: ResultPoint) -> Mapping[str, Any]:
    """A result as a flat row (`RESULT_COLUMNS`), for tables, `--json` output and the CSV export. The point fields
    are those a page shows (`PointIdentity.shown`): a disaggregated point's single-server parallelism, which no
    worker ran with (its `workers` say each role's), is null (empty in the CSV), so every row has every column.
    `topology` is the point's as every table's topology column shows it (`PointIdentity.topology`: `tp8 ep1`, or a
    disaggregated point's workers, `P2x(tp8 ep8 dpa) D1x(tp8 ep1)`)."""
    block = point.eval
    shown = point.identity.shown()
    row = {
        "result_id": point.result_id, "run_id": point.run_id, "job_id": point.job_id, "source": point.source,
        "origin": point.origin, "verdict": point.verdict, "reasons": list(point.reasons), "gpus": point.gpus,
        "topology": point.identity.topology(),
        "series": point.identity.series_label(), **{f: shown.get(f) for f in POINT_FIELDS},
        **{c: point.metrics.get(c) for c in HOT_NAMES},
        "eval_mode": block.mode if block else None, "eval_task": block.task if block else None,
        "eval_score": block.score if block else None, "eval_score_name": block.score_name if block else None,
        "eval_score_stderr": block.score_stderr if block else None,
        "eval_verdict": block.verdict if block else None,
        "eval_reasons": list(block.reasons) if block else None,
    }
    return {c: row[c] for c in RESULT_COLUMNS}
