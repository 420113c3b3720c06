"""The typed results of a discovery sweep: each run, the noise, the knee, the proposed grid and why."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.sim_warnings import WarningKind, warning_kind
from llmsweep.words import count_of


def job_growth(jobs: int, recipe_jobs: int, recipe: str = "the recipe") -> str:
    """`plans 12 jobs where the recipe plans 4 jobs (×3.0)`: what a proposed recipe costs against the one it was
    proposed for (`recipe`: how to name it), as the table and proposed.yaml's head say it: every proposed concurrency
    is a job of the official sweep, so a grid that grows is said, never silent."""
    times = f" (×{jobs / recipe_jobs:.1f})" if recipe_jobs else ""
    return f"plans {count_of(jobs, 'job')} where {recipe} plans {count_of(recipe_jobs, 'job')}{times}"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Run(_Out):
    """One measured run of one arm at one concurrency (a repeat is a run of its own)."""

    arm: str = Field(description="Arm id: recipe key and search-space path.")
    conc: int
    stage: str = Field(description="`ladder` (coarse, repeated) or `refine-<n>` (around the knee).")
    seed: int = Field(description="The run's workload seed (repeats differ in it: trace order, prompts).")
    job_id: str
    verdict: str
    source: str = Field(description="What ran it, read back from its summary: `measured` or `simulated`.")
    clock: str | None = Field(default=None, description="The clock it ran on, as its summary records it: `virtual` "
                              "(the simulator core) or `wall`.")
    metrics: dict[str, float | None] = Field(description="Hot columns of the metric table, by name.")
    kv_usage_max: float | None = Field(default=None, description="Peak GPU KV-cache usage the server reported.")
    preemptions: float | None = Field(default=None, description="Requests the server preempted in the window.")
    warnings: list[str] = Field(default_factory=list, description="What the run's outcome warned of its result, read "
                                "back from its run directory (`sim_warnings`: a real engine would refuse its job, "
                                "what the simulator does not model of it, the catalog estimates it was modelled "
                                "with).")


class MetricNoise(_Out):
    """Run-to-run noise of one metric over an arm's repeated ladder points."""

    metric: str = Field(description="Hot column name (metric table).")
    label: str
    cv: float | None = Field(description="Pooled coefficient of variation between repeats (None: no repeat).")
    dof: int = Field(description="Degrees of freedom of the pooled estimate.")
    by_conc: dict[int, float] = Field(default_factory=dict, description="Coefficient of variation between the repeats "
                                      "of each repeated concurrency (noise depends on load; between two, it is "
                                      "interpolated in log concurrency).")
    smoothed: dict[int, float] = Field(default_factory=dict, description="The figure separations use: each repeated "
                                       "concurrency's variance pooled with its repeated neighbours' (two repeats "
                                       "alone pin a spread poorly).")
    t: float | None = Field(default=None, description="95 % Student-t quantile at the pooled degrees of freedom.")


class CurvePoint(_Out):
    """An arm's mean at one concurrency over its runs."""

    conc: int
    runs: int
    means: dict[str, float | None]
    kv_usage_max: float | None = None
    preemptions: float | None = None


class Knee(_Out):
    """Where adding users stops paying: the last concurrency whose throughput per GPU rises beyond noise — or, when
    throughput still rose at the highest measured concurrency, that the knee was not reached (it lies above)."""

    conc: int | None = Field(description="The knee's concurrency; None when it was not reached within the measured "
                             "concurrencies (`above` says where the measurements stop).")
    above: int | None = Field(default=None, description="When the knee was not reached: the highest measured "
                              "concurrency, at which throughput per GPU still rose beyond noise; the knee lies above "
                              "it (raise --ladder-top).")
    next_conc: int | None = Field(description="The measured point after the knee (flat or worse); None when the knee "
                                  "was not reached.")
    reason: str
    undecided: bool = Field(default=False, description="True when run-to-run noise hides whether throughput per GPU "
                            "still rises (a sizeable mean gain inside its noise band): no knee is placed, no cap "
                            "proposed; `above` is the highest measured concurrency.")
    cliff_conc: int | None = Field(default=None,
                                   description="First concurrency whose KV cache saturates or preempts (the cliff).")
    cliff: str | None = None

    @model_validator(mode="after")
    def _reached_or_above(self) -> Knee:
        if (self.conc is None) == (self.above is None):
            raise ValueError(f"a knee is either reached (conc) or lies above the measured top (above), exactly one: "
                             f"conc={self.conc}, above={self.above}")
        return self

    @property
    def found(self) -> bool:
        """False when throughput still rose at the top of the ladder: the knee lies above what was measured."""
        return self.conc is not None

    @property
    def last(self) -> int:
        """The highest concurrency the measurements speak for: the knee, or the top measured when it was not
        reached."""
        last = self.conc if self.conc is not None else self.above
        assert last is not None  # _reached_or_above
        return last

    def describe(self) -> str:
        """`conc 8`, or `not reached (above 8)`: what a table says of it."""
        if self.undecided:
            return f"cannot tell (noise; measured up to {self.above})"
        return f"conc {self.conc}" if self.conc is not None else f"not reached (above {self.above})"


class GridPoint(_Out):
    conc: int
    why: str


class ArmWarning(_Out):
    """A warning the runs of an arm carried (`Run.warnings`): its proposal rests on them, and says it."""

    warning: str = Field(description="As the runs' outcomes recorded it (`sim_warnings`).")
    runs: int = Field(description="How many of the arm's runs carried it.")

    @property
    def engine_refuses(self) -> bool:
        """A real engine would refuse the arm's jobs (an engine rule the simulator softened): the proposed grid is
        one no engine runs as the recipe writes the arm."""
        return warning_kind(self.warning) is WarningKind.ENGINE_REFUSES


class ArmProposal(_Out):
    arm: str
    recipe_key: str
    path: str = Field(description="The arm's search-space entry under the recipe key.")
    label: str
    original: list[int] = Field(description="The recipe's concurrencies for this arm.")
    proposed: list[GridPoint]
    min_step: int | None = Field(description="Smallest gap between two proposed concurrencies.")
    knee: Knee | None
    noise: list[MetricNoise]
    curve: list[CurvePoint]
    error: str | None = Field(default=None, description="Why no grid could be proposed for this arm.")
    warnings: list[ArmWarning] = Field(default_factory=list, description="What the arm's runs warned of their "
                                       "results, each warning once with how many runs carried it: a real engine "
                                       "would refuse the arm's jobs, what the simulator does not model of them.")

    @property
    def concs(self) -> list[int]:
        return [p.conc for p in self.proposed]

    @property
    def runs(self) -> int:
        """The arm's runs the proposal rests on."""
        return sum(p.runs for p in self.curve)


class KeyPolicy(_Out):
    """The `policy` proposed for one recipe key: what proposed.yaml writes into that key."""

    min_conc_step: int | None = Field(description="`policy.min-conc-step`: the smallest proposed gap of the key's "
                                      "arms.")
    max_conc: int | None = Field(description="`policy.max-conc`: the key's highest knee, or the proposed grid's top "
                                 "where the recipe's own cap lay below it (None: no cap proposed).")

    def describe(self) -> str:
        """`min-conc-step 2, max-conc 32`: the printed table's words."""
        return ", ".join(f"{name} {value}" for name, value in (("min-conc-step", self.min_conc_step),
                                                               ("max-conc", self.max_conc)) if value is not None)


class Stage(_Out):
    """One stage of the discovery: an ordinary `llmsweep run` of a stage recipe, and what it launched."""

    name: str = Field(description="`ladder` or `refine-<n>`.")
    recipe: str = Field(description="The stage recipe it ran (`stages/<name>.yaml`).")
    run_dir: str
    runs_planned: int
    runs_measured: int = Field(description="Runs with a valid or smoke summary, read back from the run directory.")
    server_launches: int = Field(description="Engine servers started, read back from the run directory's server "
                                 "folders (relaunches after a crash included; none on the simulator in virtual time).")
    sized_for: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="By arm: launch flags pinned to the stage's highest concurrency so one "
        "server serves every point of the arm (`discover.servers`); empty when no flag depended on the concurrency.")
    seconds: float | None = Field(default=None, description="Wall-clock seconds the stage took.")
    run_seconds: list[float] = Field(default_factory=list, description="Seconds each of its jobs took (launch "
                                     "excluded), as its outcome says.")
    interrupted: bool = False
    skipped: str | None = Field(default=None, description="Why the stage did not run (`--time-limit`: its estimate "
                                "from the earlier stages' measured times did not fit).")
    paused: dict[str, str] = Field(default_factory=dict, description="By job id: runs measured while llmsweep was "
                                   "stopped (Ctrl-Z) and continued, judged invalid as `run` judges them "
                                   "(`readback.judge_paused`), with the reason; none counts, and the discovery "
                                   "exits 1.")

    @property
    def overhead_s(self) -> float | None:
        """What the stage spent beside its jobs: planning, the server's start and stop, storing."""
        return None if self.seconds is None else max(0.0, self.seconds - sum(self.run_seconds))


class Discovery(_Out):
    """What `llmsweep discover` measured and proposes."""

    recipe_file: str
    simulate: bool = Field(description="Whether `--simulate` was asked for (each run's `source` says what ran it).")
    repeats: int
    ladder_top: int
    runs: list[Run]
    arms: list[ArmProposal]
    points_measured: int = Field(description="Distinct (arm, concurrency) points measured.")
    runs_measured: int = Field(description="Runs, repeats included.")
    min_conc_step: int | None = Field(description="The smallest proposed `policy.min-conc-step` over the recipe keys "
                                      "(none when interrupted); `policy` has each key's.")
    max_conc: int | None = Field(description="The highest proposed `policy.max-conc` over the recipe keys: a key's "
                                 "highest knee, or, where a recipe's own cap lay below the proposed grid, that grid's "
                                 "top, to which it is raised (none when interrupted); `policy` has each key's.")
    policy: dict[str, KeyPolicy] = Field(default_factory=dict, description="By recipe key: the policy proposed.yaml "
                                         "writes into it (a key without an entry gets none).")
    stages: list[Stage] = Field(default_factory=list)
    executor: str = Field(default="local", description="Where the stages' servers ran (`--executor`).")
    interrupted: str | None = Field(default=None, description="The stage an interrupt (Ctrl-C, SIGTERM, a timeout) "
                                    "stopped: the runs before it are analysed, no recipe is proposed.")
    failed: str | None = Field(default=None, description="A stage that stopped on an error (a disk full, a store or "
                               "executor error): the runs before it are analysed, no recipe is proposed.")
    proposal_error: str | None = Field(default=None, description="Why no proposed recipe was written although a grid "
                                       "was found (the recipe could not be rewritten to say it).")
    proposed_recipe: str | None = None
    recipe_jobs: int | None = Field(default=None, description="Jobs the recipe plans, as `llmsweep run` of it runs "
                                    "them (a multi-node entry's concurrencies each a job): what its sweep costs today.")
    proposed_jobs: int | None = Field(default=None, description="Jobs the proposed recipe plans, counted as "
                                      "`recipe_jobs` is (None when no recipe was proposed): every proposed concurrency "
                                      "is a job of the official sweep.")
    patch: str = Field(default="", description="Unified diff of the recipe file to the proposed one.")

    @property
    def paused(self) -> dict[str, str]:
        """Every stage's runs judged invalid for a stop of llmsweep (Ctrl-Z) while they measured, with the reason."""
        return {job_id: why for stage in self.stages for job_id, why in stage.paused.items()}
