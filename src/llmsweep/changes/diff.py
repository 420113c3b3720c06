"""The semantic difference of two recipe trees at job level: added, removed and changed jobs, each change named.

Both sides are planned with the planner `run` uses (`plan.full_sweep` of the loaded recipes), under the run's eval
selection (`--no-evals`, `--evals-only`, `--all-evals`: the jobs compared are the jobs that run), so a change shows
exactly as the jobs it makes: a new concurrency is one added job, an env var changed in one arm changes that arm's
jobs and no other. Jobs are matched by identity — recipe key plus the readable part of the job id (exp-name, precision,
framework, topology, disagg, spec method, concurrency, runner, eval); among several jobs of one identity, a job
identical on both sides is matched first, the rest in order — and a matched pair that differs is a change, with the
typed fields that differ and their cause (`CAUSES`).

A side is a git revision (materialised with `git archive` into a temporary directory; findings name its files
`REV:path`) or a directory. A base recipe that does not load or plan counts as planning no job (a change that fixes it
adds every job of it), said in the change set's notes; a head recipe that does not is an error.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.errors import ConfigError
from llmsweep.findings import Finding
from llmsweep.plan import Job
from llmsweep.plan.slices import curve_key, slice_concurrencies
from llmsweep.spec.loader import recipe_files
from llmsweep.spec.scope import RECIPES_DIR, Matrix, alone_note, weighed_alone
from llmsweep.words import count_of, noun
from llmsweep.workload.scenario import repeat_index

if TYPE_CHECKING:
    from llmsweep.catalog.fleet import FleetCatalog
    from llmsweep.plan.matrix import EvalOptions
    from llmsweep.spec.recipe import Recipe

CAUSES: tuple[str, ...] = ("recipe", "search space", "image", "engine args", "env", "workload", "golden curve",
                           "eval")
"""What can change a job, in the order they are reported."""


_NOT_COMPARED = frozenset({"id", "recipe_file", "recipe_fingerprint"})
"""Job fields that are consequences (the fingerprint, the id's hash) or locations, not causes."""
_CITATIONS = (("acceptance", "cited"), ("serve", "spec_decoding", "acceptance_length_source"))
"""Nested Job fields that say where a value was measured and change nothing that runs (a pinned AL's cited source)."""


def cause_of(path: str) -> str:
    """The cause a differing Job field (dotted path) is reported under."""
    head, _, rest = path.partition(".")
    if head == "image":
        return "image"
    if head == "serve":
        return "env" if rest.split(".")[0] in ("env", "secret_env") else "engine args"
    if head == "workload":
        return "workload"
    if head == "acceptance":
        return "golden curve"
    if head in _EVAL_POINT:
        return "eval"
    if head in _RECIPE_FIELDS:
        return "recipe"
    return "search space"


_RECIPE_FIELDS = frozenset({"model", "model_prefix", "precision", "framework", "runner", "runner_label", "sku",
                            "engine", "require_power", "multinode", "disagg", "router", "kv_p2p_transfer"})
"""Job fields a recipe sets for all its jobs (model, precision, runner, engine, required power, ...), reported as
`recipe`; the rest of the matrix (parallelism, concurrency, lengths, offload, spec decoding) is `search space`."""


@dataclass(frozen=True)
class JobChange:
    """One job on both sides whose typed fields differ. `same_launch`: only its `serve` block changed and both sides
    render the same server launch (a value respelled, `0.75` → `"0.75"`): listed, with nothing to run."""

    base: Job
    head: Job
    fields: tuple[str, ...]
    same_launch: bool = False

    @property
    def causes(self) -> tuple[str, ...]:
        found = {cause_of(f) for f in self.fields}
        return tuple(c for c in CAUSES if c in found)

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.head.id, "base_job": self.base.id, "recipe_key": self.head.recipe_key,
                "causes": list(self.causes), "fields": list(self.fields), "same_launch": self.same_launch}


SAME_LAUNCH = "respelled: the same launch, nothing to run"
"""How a change whose both sides render the same server launch is said (`JobChange.same_launch`)."""


def _same_launch(base: Job, head: Job, fields: Sequence[str]) -> bool:
    """Only `serve` fields differ and both jobs render the same real engine's launch (argv, env, files:
    `LaunchSpec.fingerprint`, what --reuse and --resume decide on): the edit respells a value, and the job would
    measure what it measured. Never for the simulator's launch, which leaves out what it does not model (an env
    var): an edit there is still the recipe's change."""
    from llmsweep.engine_ids import SIM
    from llmsweep.engines import same_launch

    if not fields or not all(f.startswith("serve.") for f in fields):
        return False
    alike = same_launch(base, head)
    return alike is not None and alike[0] and alike[1] != SIM.id


@dataclass(frozen=True)
class ConcChange:
    """A multi-node job whose concurrency list alone changed: one deployment, its points run in turn.

    The points both sides have are the same measurements, so only the concurrencies added run — as a slice of the
    head job (`plan.slices.slice_concurrencies`), not the whole list again on the multi-node cluster; a concurrency
    removed runs nothing.
    """

    base: Job
    head: Job
    added: tuple[int, ...]
    removed: tuple[int, ...]

    @property
    def to_run(self) -> Job | None:
        """The head job at the added concurrencies (source order), or None when concurrencies were only removed — or
        when the head is an eval-only job (`--evals-only`, `--all-evals`) whose eval stays at a point both sides have:
        such a slice would measure nothing (no throughput, no eval)."""
        if not self.added:
            return None
        sliced = slice_concurrencies(self.head, self.added)
        return None if sliced.eval_only and not sliced.run_eval else sliced

    def as_dict(self) -> dict[str, Any]:
        run = self.to_run
        return {"job": run.id if run is not None else self.head.id, "base_job": self.base.id, "head_job": self.head.id,
                "recipe_key": self.head.recipe_key, "causes": ["search space"], "fields": ["conc"],
                "added_conc": list(self.added), "removed_conc": list(self.removed)}


@dataclass
class ChangeSet:
    """What differs between the jobs of two recipe trees."""

    base: str
    head: str
    added: list[Job] = field(default_factory=list)
    removed: list[Job] = field(default_factory=list)
    changed: list[JobChange] = field(default_factory=list)
    unchanged: list[Job] = field(default_factory=list)
    concs: list[ConcChange] = field(default_factory=list)
    """Multi-node jobs whose concurrency list alone changed."""
    notes: list[str] = field(default_factory=list)
    """What the change set assumed, one line each: a base recipe that does not load or plan counts as planning no
    job (its finding, the file named `REV:path`)."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.concs)

    def jobs_to_run(self) -> list[Job]:
        """The head jobs that must run: every added and every changed job (but one whose edit renders the same launch,
        `JobChange.same_launch`), and the added concurrencies of a multi-node job whose list alone grew (a slice:
        `plan.slices.resolve_job_ids` finds it by id in the head plan)."""
        slices = [run for c in self.concs if (run := c.to_run) is not None]
        return [*self.added, *(c.head for c in self.changed if not c.same_launch), *slices]

    def concs_text(self) -> str:
        """The multi-node jobs whose concurrency list alone changed, as the summaries say them ("" when none): those
        with concurrencies added or removed, and those whose list was only reordered (nothing to run)."""
        moved = sum(1 for c in self.concs if c.added or c.removed)
        reordered = len(self.concs) - moved
        return "".join((f"{count_of(moved, 'multi-node job')} with concurrencies added or removed, " if moved else "",
                        f"{count_of(reordered, 'multi-node job')} with {noun(reordered, 'its', 'their')} concurrencies "
                        "only reordered, " if reordered
                        else ""))

    def to_run(self) -> list[str]:
        """Ids of :meth:`jobs_to_run`."""
        return [j.id for j in self.jobs_to_run()]

    def rows(self) -> list[dict[str, Any]]:
        """One row per added, removed or changed job (the table and `--json`)."""
        out: list[dict[str, Any]] = []
        for job in self.added:
            out.append({"change": "added", "job": job.id, "recipe_key": job.recipe_key, "causes": [], "fields": []})
        for change in self.changed:
            out.append({"change": "changed", **change.as_dict()})
        for conc in self.concs:
            kind = "conc-added" if conc.added else "conc-removed" if conc.removed else "conc-reordered"
            out.append({"change": kind, **conc.as_dict()})
        for job in self.removed:
            out.append({"change": "removed", "job": job.id, "recipe_key": job.recipe_key, "causes": [], "fields": []})
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"base": self.base, "head": self.head, "added": len(self.added), "removed": len(self.removed),
                "changed": len(self.changed), "conc_changed": len(self.concs), "unchanged": len(self.unchanged),
                "to_run": self.to_run(), "jobs": self.rows(), "notes": list(self.notes)}


def match_key(job: Job) -> tuple[str, str]:
    """A job's identity across two plans: its recipe key and its id without the fingerprint hash."""
    return match_id(job.recipe_key, job.id)


def match_id(recipe_key: str, job_id: str) -> tuple[str, str]:
    """`match_key` of a job known by its recipe key and id (a job folder's `job.json`, read as it was written)."""
    head, sep, _ = job_id.rpartition("_")
    return recipe_key, head if sep else job_id


def same_point(recorded: Job, planned: Job) -> bool:
    """Two points of multi-node jobs (`plan.point.one_point_per_job`: one deployment runs its concurrency list in turn)
    that differ only in that list and the eval marking it derives: the same measurement, as :func:`_conc_changes`
    pairs their jobs (a point's id holds its deployment's list, so a concurrency added or dropped renames every point
    of it). The repeat each is must agree too."""
    return (recorded.multinode and planned.multinode and recorded.concs == planned.concs
            and repeat_index(recorded.id) == repeat_index(planned.id)
            and curve_key(recorded, exclude=_EVAL_POINT) == curve_key(planned, exclude=_EVAL_POINT))


def _leaf_diff(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += _leaf_diff(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if a == b else [prefix]


def job_field_diff(base: Job, head: Job) -> tuple[str, ...]:
    """Dotted paths of the typed Job fields that differ (serve.env.X, workload.num_prompts, image, ...)."""
    return tuple(_leaf_diff(_compared(base), _compared(head), ""))


def _compared(job: Job) -> dict[str, Any]:
    """The job's fields that can cause a change: all but :data:`_NOT_COMPARED` and the :data:`_CITATIONS`."""
    doc = {k: v for k, v in job.model_dump(mode="json").items() if k not in _NOT_COMPARED}
    for *parents, leaf in _CITATIONS:
        node: Any = doc
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return doc


def _content(job: Job) -> str:
    """A job's compared fields as canonical JSON: two jobs equal here have no field for `job_field_diff` to name."""
    return json.dumps(_compared(job), sort_keys=True, separators=(",", ":"))


def _pair(base: Sequence[Job], head: Sequence[Job]) -> tuple[dict[int, int], list[int]]:
    """Pair the jobs of the two plans that share an identity (`match_key`): (head index → base index, and the base
    indices left unpaired).

    A recipe can hold several jobs of one identity (search-space blocks that differ only in fields the id does not
    show). Within such a group a head job identical to a base job is that job, wherever either stands, so a block
    inserted before an existing one does not shift every later pairing; the jobs left are paired in order (a job
    whose fields changed)."""
    groups_a: dict[tuple[str, str], list[int]] = {}
    groups_b: dict[tuple[str, str], list[int]] = {}
    for i, job in enumerate(base):
        groups_a.setdefault(match_key(job), []).append(i)
    for i, job in enumerate(head):
        groups_b.setdefault(match_key(job), []).append(i)
    pairs: dict[int, int] = {}
    for key, heads in groups_b.items():
        bases = list(groups_a.get(key, ()))
        if len(heads) == 1 and len(bases) == 1:
            pairs[heads[0]] = bases[0]
            continue
        rest: list[int] = []
        contents = {b: _content(base[b]) for b in bases}
        for h in heads:
            content = _content(head[h])
            same = next((b for b in bases if contents[b] == content), None)
            if same is None:
                rest.append(h)
            else:
                pairs[h] = same
                bases.remove(same)
        pairs.update(zip(rest, bases, strict=False))
    paired = set(pairs.values())
    return pairs, [i for i in range(len(base)) if i not in paired]


def diff_jobs(base: Sequence[Job], head: Sequence[Job], *, base_label: str = "base",
              head_label: str = "head") -> ChangeSet:
    """Match the jobs of two plans by identity and name what differs; order follows the head plan."""
    pairs, unpaired = _pair(base, head)
    out = ChangeSet(base_label, head_label)
    for i, job in enumerate(head):
        if i not in pairs:
            out.added.append(job)
            continue
        old = base[pairs[i]]
        fields = job_field_diff(old, job)
        if fields and set(fields) <= set(_EVAL_POINT) and not job.run_eval:
            # only its eval marking moved away (an 8k1k curve's upper median moved with a concurrency added): the
            # point measures what it measured, and no eval is owed — nothing to run again
            out.unchanged.append(job)
        elif fields:
            out.changed.append(JobChange(old, job, fields, _same_launch(old, job, fields)))
        else:
            out.unchanged.append(job)
    out.removed = [base[i] for i in unpaired]
    _conc_changes(out)
    return out


_EVAL_POINT = ("run_eval", "eval_conc")
"""A multi-node row's eval marking, derived from its concurrency list (the highest eligible one is evaluated)."""


def _conc_changes(out: ChangeSet) -> None:
    """Move added/removed pairs of multi-node jobs that differ only in their concurrency list into `out.concs`.

    Such a job's id holds its list (`conc8x16x32`), so a concurrency added or dropped shows as one job removed and
    another added, and the whole list ran again. Paired here when every other field is equal (the eval marking too,
    unless the eval moved to an added concurrency, which the slice then runs) and the lists share a concurrency; a
    head job with several candidates takes the base job its list overlaps most. Anything else changed stays a whole
    job added (every concurrency runs)."""
    bases = [b for b in out.removed if isinstance(b.conc, list)]
    if not bases:
        return
    keys = {id(b): curve_key(b, exclude=_EVAL_POINT) for b in bases}
    paired: set[int] = set()
    for head in [h for h in out.added if isinstance(h.conc, list)]:
        key = curve_key(head, exclude=_EVAL_POINT)
        best: tuple[int, Job] | None = None
        for base in bases:
            overlap = len(set(base.concs) & set(head.concs))
            if id(base) in paired or keys[id(base)] != key or not overlap:
                continue
            if best is None or overlap > best[0]:
                best = (overlap, base)
        if best is None:
            continue
        base = best[1]
        added = tuple(dict.fromkeys(c for c in head.concs if c not in base.concs))
        removed = tuple(dict.fromkeys(c for c in base.concs if c not in head.concs))
        same_eval = (base.run_eval, base.eval_conc) == (head.run_eval, head.eval_conc)
        if not same_eval and not (head.run_eval and head.eval_conc in added):
            continue  # the eval moved to a point both sides have, or went: the whole job runs
        paired.add(id(base))
        out.concs.append(ConcChange(base, head, added, removed))
    moved_heads = {id(c.head) for c in out.concs}
    out.added = [j for j in out.added if id(j) not in moved_heads]
    out.removed = [j for j in out.removed if id(j) not in paired]


# ------------------------------------------------------------------------------------------------ sides


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cannot run git in {repo}: {exc}", fix="install git, or compare two directories") from exc


def git_toplevel(repo: Path) -> Path | None:
    proc = _git(repo, "rev-parse", "--show-toplevel")
    return Path(proc.stdout.decode().strip()) if proc.returncode == 0 else None


def is_commit(repo: Path | None, rev: str) -> bool:
    """Whether `rev` names a commit the clone at `repo` holds (a full SHA it lacks is none, as git show may not say)."""
    return _is_rev(repo, rev)


def _is_rev(repo: Path | None, rev: str) -> bool:
    return repo is not None and bool(rev) and _git(repo, "rev-parse", "--verify", "--quiet",
                                                   f"{rev}^{{commit}}").returncode == 0


def split_range(spec: str, repo: Path | None) -> tuple[str, str]:
    """`BASE..HEAD` → (BASE, HEAD); each side a directory or a git revision; an empty HEAD is the working tree.

    Directory names may hold `..` themselves (`../a..../b`), so every split is tried until both sides resolve.
    """
    if "..." in spec and not Path(spec).exists() and spec.count("...") == 1 and _is_rev(repo, spec.split("...")[0]):
        raise ConfigError(f"{spec!r}: a three-dot range is not supported", fix="write BASE..HEAD")
    start = 0
    while (i := spec.find("..", start)) >= 0:
        base, head = spec[:i], spec[i + 2:]
        if base and (Path(base).is_dir() or _is_rev(repo, base)) and (
                (not head and repo is not None) or Path(head).is_dir() or _is_rev(repo, head)):
            return base, head
        start = i + 1
    raise ConfigError(f"{spec!r} is not BASE..HEAD of two git revisions or two directories{_why_not(spec, repo)}",
                      fix="e.g. `llmsweep changes main..HEAD` inside the repository, or `changes old/..new/`")


def missing_rev_hint(repo: Path | None, rev: str) -> str:
    """Why `rev` may be missing from the clone at `repo`, and how to fetch it ("" when the clone is complete and `rev`
    names no remote branch): a shallow clone (actions/checkout's default, one commit) lacks the pull request's base,
    and a single-branch clone lacks `origin/main`."""
    if repo is None:
        return ""
    if _git(repo, "rev-parse", "--is-shallow-repository").stdout.decode().strip() == "true":
        return (f"; {repo} is a shallow clone, which holds only its last commits: fetch the history (`git fetch "
                "--unshallow`, or `git fetch origin BRANCH` for a branch; in GitHub Actions, actions/checkout with "
                "`fetch-depth: 0`)")
    remote, sep, branch = rev.partition("/")
    if sep and branch and _git(repo, "remote", "get-url", remote).returncode == 0:
        return f"; this clone has no {rev}: fetch it (`git fetch {remote} {branch}`)"
    return ""


def _why_not(spec: str, repo: Path | None) -> str:
    """Which side of a simple `A..B` (one `..`) resolves to nothing, and why: where the range fails."""
    if repo is None:
        return (": this directory is not inside a git repository (run it there, or name two directories)"
                if not all(Path(side).is_dir() for side in spec.split("..", 1) if side) else "")
    if spec.count("..") != 1:
        return ""
    bad = [f"{label} {side!r}" for label, side in zip(("BASE", "HEAD"), spec.split(".."), strict=True)
           if side and not Path(side).is_dir() and not _is_rev(repo, side)]
    if not spec.split("..")[0]:
        bad.insert(0, "BASE is empty")
    if not bad:
        return ""
    missing = next((side for side in spec.split("..") if side and not Path(side).is_dir()
                    and not _is_rev(repo, side)), None)
    return (f": {' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} no commit of {repo} nor a directory"
            + (missing_rev_hint(repo, missing) if missing is not None else ""))


@contextmanager
def _materialised(side: str, repo: Path | None) -> Iterator[Path]:
    """The tree of one side: a directory as it is, the working tree for an empty side, a revision via git archive."""
    if not side:
        assert repo is not None
        yield repo
        return
    if Path(side).is_dir():
        yield Path(side)
        return
    assert repo is not None
    proc = _git(repo, "archive", "--format=tar", side)
    if proc.returncode != 0:
        raise ConfigError(f"git archive {side} failed: {proc.stderr.decode(errors='replace').strip()}",
                          fix="name a commit of this repository")
    with tempfile.TemporaryDirectory(prefix="llmsweep-changes-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def _yaml_under(folder: Path) -> list[Path]:
    """The recipe files under `folder` as every command walks a folder (`spec.loader.recipe_files`: a discovery's
    output below it left out); none when it is no folder."""
    return recipe_files([folder]) if folder.is_dir() else []


def _recipe_files(root: Path, files: Sequence[Path]) -> list[Path]:
    """The recipe files of one side: those named (a directory: every YAML file under it on this side, so a recipe a
    change adds is in it), else every YAML file under `recipes/`."""
    if files:
        out: list[Path] = []
        for f in files:
            path = root / f
            out += _yaml_under(path) if path.is_dir() else [path] if path.is_file() else []
        return out
    return _yaml_under(root / RECIPES_DIR)


def _side_file(path: Path | None, top: Path | None, root: Path) -> Path | None:
    """A fleet file inside the repository, as one side of the change has it (its GPUs per node and DRAM change the
    jobs: a change to it is a change); one outside the repository, or absent from that side, is used as given."""
    if path is None or top is None:
        return path
    try:
        rel = path.resolve().relative_to(top.resolve())
    except ValueError:
        return path
    side = root / rel
    return side if side.is_file() else path


def _check_sources(base: Path, head: Path, files: Sequence[Path], base_label: str, head_label: str) -> None:
    """Refuse a change set that would be empty for want of input: a recipe file named that neither side has (a
    typo), or two sides with no recipe file at all (a tree without `recipes/`). Either used to say "0 jobs to run",
    exit 0, and let CI run nothing."""
    if files:
        missing = [f for f in files if not (base / f).exists() and not (head / f).exists()]
        if missing:
            raise ConfigError(f"{missing[0]} is in neither {base_label} nor {head_label}",
                              fix="name a recipe file of one of the two sides (a path inside the repository, or "
                                  "inside either directory)")
    elif not _recipe_files(base, ()) and not _recipe_files(head, ()):
        raise ConfigError(f"neither {base_label} nor {head_label} has recipe files under {RECIPES_DIR}/",
                          fix="name the recipe files to compare after the range (`llmsweep changes A..B FILE...`)")


def at_revision(findings: Sequence[Finding], root: Path, rev: str | None) -> list[Finding]:
    """The findings about files of a revision materialised under `root`, each naming its file `REV:path` (what `git
    show` takes) instead of the temporary directory, gone once the command ends. A directory or the working tree
    (`rev` None) is named as it is."""
    if rev is None:
        return list(findings)
    out = []
    for f in findings:
        try:
            rel = Path(f.file or "").resolve().relative_to(root.resolve())
        except ValueError:
            out.append(f)
            continue
        out.append(f.model_copy(update={"file": f"{rev}:{rel.as_posix()}"}))
    return out


def _plan(root: Path, files: Sequence[Path], runner_config: Path | None, label: str,
          evals: EvalOptions | None = None, *, rev: str | None = None) -> tuple[list[Job], list[str]]:
    """The jobs of the head side, planned as `run` plans them, and a note per file or recipe of the matrix its eval
    rows were chosen without (:func:`_left_out`); recipes that do not load or plan stop the change set (exit 2), each
    finding naming its file as that side has it (:func:`at_revision`)."""
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.plan import full_sweep, matrix_of
    from llmsweep.spec.loader import load_recipes

    paths = _recipe_files(root, files)
    if not paths:
        return [], []
    loaded = load_recipes(paths)
    loaded.findings = at_revision(loaded.findings, root, rev)
    try:
        loaded.raise_on_error()
        matrix = matrix_of(paths, evals, root=root)
        jobs = full_sweep(loaded.recipes, load_fleet(runner_config) if runner_config is not None else default_fleet(),
                          evals, matrix=matrix)
        return jobs, _left_out(matrix, root, rev)
    except ConfigError as exc:
        fix = (f"fix the named lines of {rev} (`git show {rev}:PATH` prints a file); `llmsweep validate` on a checkout "
               "of it lists every finding") if rev is not None and exc.findings else exc.fix
        raise ConfigError(f"the recipes of {label} do not plan: {exc.message}", fix=fix,
                          findings=exc.findings) from exc


def _plan_base(root: Path, files: Sequence[Path], runner_config: Path | None, label: str, head_label: str,
               evals: EvalOptions | None = None, *, rev: str | None = None) -> tuple[list[Job], list[str]]:
    """The jobs of the base side and a note per recipe problem there: a base recipe that does not load or plan (the
    change may be the very fix of it) counts as planning no job, so every job the head plans from it is added. The
    recipes that load are compared as usual. Each note names the file `REV:path` and its finding."""
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.plan import matrix_of
    from llmsweep.policy.planning import plan_recipes
    from llmsweep.spec.loader import load_recipes

    paths = _recipe_files(root, files)
    if not paths:
        return [], []
    loaded = load_recipes(paths)
    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    matrix = matrix_of(paths, evals, root=root)
    jobs, unplanned = plan_recipes(loaded.recipes, fleet, None, evals, matrix)
    problems = at_revision([*loaded.errors, *unplanned], root, rev)
    head = "the working tree" if head_label == "working tree" else head_label
    notes = [f"{f.render().splitlines()[0]} — at {label} it plans no job, so every job {head} plans from it counts "
             "as added" for f in problems]
    return jobs, notes + _left_out(matrix, root, rev)


def _left_out(matrix: Matrix | None, root: Path, rev: str | None) -> list[str]:
    """A side's files or recipes of its matrix that its eval rows were chosen without (`spec.scope.Matrix.left_out`:
    they do not load or plan there), each its warning's first line, its file named as that side has it."""
    if matrix is None:
        return []
    return [f.render().splitlines()[0] for f in at_revision(matrix.left_out, root, rev)]


def _relative_files(files: Sequence[Path], top: Path | None) -> list[Path]:
    """Files named on the command line, as paths inside the tree (relative to the repository top in git mode). A
    relative path is taken from the current directory, or, outside the repository (`changes --repo R`), from its
    top."""
    out = []
    for f in files:
        if top is not None:
            full = f if f.is_absolute() else Path.cwd() / f
            if not f.is_absolute() and not _under(Path.cwd(), top):
                full = top / f
            try:
                out.append(full.resolve().relative_to(top.resolve()))
                continue
            except ValueError:
                raise ConfigError(f"{f} is not inside the repository {top}",
                                  fix="name recipe files of the repository whose revisions are compared") from None
        out.append(f)
    return out


def _check_in_trees(files: Sequence[Path], rel: Sequence[Path], base: str, head: str) -> None:
    """Refuse a file named in directory mode that lies inside neither directory (an absolute path elsewhere, a
    `../` path out of them): both sides would read that one file, and the change set would say it changed nothing."""
    for named, f in zip(files, rel, strict=True):
        if f.is_absolute() or Path(os.path.normpath(f)).parts[:1] == ("..",):
            raise ConfigError(f"{named} is inside neither {base} nor {head}: both sides would read that one file, "
                              "so nothing in it could change",
                              fix="name a recipe file inside one of the two directories, or a path as both hold it "
                                  "(e.g. recipes/x.yaml)")


def _under(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _inside(path: Path, root: Path) -> Path:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return path


def head_differs(spec: str, files: Sequence[Path], *, repo: Path | None = None) -> list[str]:
    """The files (repository paths) that differ from `spec`'s HEAD when HEAD is a git revision: what `run --changed`
    plans is the files as they are in the working tree, under HEAD's job ids, so an edit since HEAD would run (or
    leave out) jobs the change set never saw. Empty when HEAD is the working tree, or the range is two directories."""
    top = git_toplevel(repo or Path.cwd())
    if top is None:
        return []
    base, head = split_range(spec, top)
    if not head or (Path(base).is_dir() and Path(head).is_dir()):
        return []
    paths = [str(p) for p in _relative_files(files, top)] or ["recipes"]
    # NUL-separated: git quotes a non-ASCII path (`"r\303\251.yaml"`) and a path may hold spaces
    changed = _git(top, "diff", "-z", "--name-only", head, "--", *paths).stdout
    untracked = _git(top, "ls-files", "-z", "--others", "--exclude-standard", "--", *paths).stdout
    return sorted({name for raw in (changed, untracked) for name in raw.decode(errors="replace").split("\0") if name})


def changes_between(spec: str, files: Sequence[Path] = (), *, repo: Path | None = None,
                    runner_config: Path | None = None, evals: EvalOptions | None = None) -> ChangeSet:
    """The change set of `BASE..HEAD`: revisions of the git repository at `repo` (default: the current directory),
    or two directories. `files` narrows it to those recipe files (else every YAML file under `recipes/`).

    Both sides are planned under `evals` (default: InferenceX's default marking), the selection of the run the ids
    are for: under `--evals-only`/`--all-evals` the plan holds eval-only jobs (`…_eval_…` ids), so the change set is
    the evals of what changed — an eval whose server, model or point changed, or that a change added (the eval
    marking follows the concurrency grid) — and a change that touches no eval row selects none."""
    from llmsweep.evals.results import wants_eval

    top = git_toplevel(repo or Path.cwd())
    base, head = split_range(spec, top)
    git_mode = not (Path(base).is_dir() and Path(head).is_dir())
    rel = _relative_files(files, top if git_mode else None)
    if not git_mode:  # a file named inside either directory (`new/recipes/x.yaml`) is that path in both trees
        rel = [_inside(_inside(f, Path(head)), Path(base)) for f in rel]
        _check_in_trees(files, rel, base, head)
    head_label = head or "working tree"
    renamed = _renamed_files(top, base, head, rel) if git_mode and top is not None else {}
    base_rel = [renamed.get(f, f) for f in rel]
    with _materialised(base, top) as base_root, _materialised(head, top) as head_root:
        _check_sources(base_root, head_root, rel, base, head_label)
        base_jobs, notes = _plan_base(base_root, base_rel,
                                      _side_file(runner_config, top if git_mode else None, base_root),
                                      base, head_label, evals, rev=base if git_mode else None)
        notes = [f"{new.as_posix()} is {old.as_posix()} at {base} (renamed since): its jobs are compared with that "
                 "file's" for new, old in renamed.items()] + notes
        head_jobs, left_out = _plan(head_root, rel, _side_file(runner_config, top if git_mode else None, head_root),
                                    head_label, evals, rev=head if git_mode and head else None)
        notes += [n for n in left_out if n not in notes]
        # files outside the tree's recipes/ beside it: their eval rows are their own, not that matrix's (said once)
        if rel and (head_root / RECIPES_DIR).is_dir() and weighed_alone(_recipe_files(head_root, rel), root=head_root) \
                and any(wants_eval(j) for j in [*base_jobs, *head_jobs]):
            notes.append(alone_note(files))
    out = diff_jobs(base_jobs, head_jobs, base_label=base, head_label=head_label)
    out.notes = notes
    if git_mode and top is not None and (diverged := _diverged(top, base, head)):
        out.notes.append(diverged)
    return out


def _renamed_files(top: Path, base: str, head: str, files: Sequence[Path]) -> dict[Path, Path]:
    """The named recipe files that `base` holds under another path, renamed since (git's rename detection): new path
    -> old path. A file named by its new path would otherwise be absent from the base, and every job of it added."""
    named = {f.as_posix(): f for f in files}
    if not named:
        return {}
    proc = _git(top, "diff", "-z", "--name-status", "-M", base, *([head] if head else []), "--")
    words = proc.stdout.decode(errors="replace").split("\0") if proc.returncode == 0 else []
    out: dict[Path, Path] = {}
    i = 0
    while i < len(words) and words[i]:
        status = words[i]
        width = 3 if status[:1] in ("R", "C") else 2
        if status[:1] == "R" and i + 2 < len(words) and words[i + 2] in named:
            out[named[words[i + 2]]] = Path(words[i + 1])
        i += width
    return out


def _diverged(top: Path, base: str, head: str) -> str | None:
    """A note when `base` is not an ancestor of `head` (a branch behind main, compared as `main..HEAD`): the trees are
    compared, so what `base` changed since the two diverged shows reversed — main's new jobs as removed, the jobs it
    changed as changed back — and `run --changed` would run those on the branch's older recipes. None otherwise."""
    head_rev = head or "HEAD"
    if Path(base).is_dir() or _git(top, "merge-base", "--is-ancestor", base, head_rev).returncode != 1:
        return None
    fork = _git(top, "merge-base", base, head_rev).stdout.decode().strip()
    since = f"`llmsweep changes {fork[:12]}..{head}`, from their merge base" if fork else "from their merge base"
    return (f"{base} is not an ancestor of {head or 'the working tree'}: the change set compares the two trees, so "
            f"what {base} changed since they diverged shows here reversed (its new jobs as removed, its changes as "
            f"changed back); for this branch's own change compare {since}, or merge {base} in first")


@contextmanager
def recipes_at(rev: str, files: Sequence[Path], *, repo: Path,
               runner_config: Path | None = None) -> Iterator[tuple[dict[str, Recipe], FleetCatalog]]:
    """The recipes and fleet of one revision of the git repository at `repo`, for as long as the context lasts (plan
    them inside it). `files` are recipe files or directories as the working tree names them (a directory is read as
    that revision has it); the fleet file is that revision's when it lies inside the repository, as in a change set.
    """
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.spec.loader import load_recipes

    top = git_toplevel(repo)
    if top is None or not _is_rev(top, rev):
        raise ConfigError(f"{rev!r} is not a revision of a git repository at {repo}{missing_rev_hint(top, rev)}",
                          fix="name a commit of the repository the changelog and recipes are in")
    rel = _relative_files(files, top)
    renamed = _renamed_files(top, rev, "", rel)  # a file named as the working tree names it, renamed since `rev`
    rel = [renamed.get(f, f) for f in rel]
    with _materialised(rev, top) as root:
        loaded = load_recipes(_recipe_files(root, rel))
        if not loaded.ok:
            first = at_revision(loaded.errors, root, rev)[0]
            raise ConfigError(f"the recipes of {rev} do not load: {first.render()}",
                              fix="compare against a revision whose recipes load",
                          findings=at_revision(loaded.errors, root, rev))
        fleet = _side_file(runner_config, top, root)
        yield dict(loaded.recipes), load_fleet(fleet) if fleet is not None else default_fleet()
