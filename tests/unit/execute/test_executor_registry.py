"""The executor registry: one place lists the executors, the CLI offers exactly those, a new one is one class."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import click
import pytest
from pydantic import BaseModel, ConfigDict

from llmsweep.errors import ConfigError
from llmsweep.execute import executor as executor_mod
from llmsweep.execute.base import ImageMount
from llmsweep.execute.docker import DockerExecutor
from llmsweep.execute.executor import Event, register_executor
from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup
from llmsweep.execute.local import LocalExecutor
from llmsweep.execute.registry import executor_kinds, get_executor
from llmsweep.execute.slurm import SlurmExecutor, SlurmOptions


def test_the_registry_lists_local_docker_and_slurm() -> None:
    assert executor_kinds() == ("docker", "local", "slurm")
    assert isinstance(get_executor("local"), LocalExecutor)
    assert isinstance(get_executor("docker"), DockerExecutor)
    assert isinstance(get_executor("slurm"), SlurmExecutor)


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown executor kind 'kubernetes'") as err:
        get_executor("kubernetes")
    assert err.value.fix == "use one of docker, local, slurm"


def test_options_are_validated_by_the_executor() -> None:
    with pytest.raises(ConfigError, match=r"(?s)invalid slurm executor options.*partion") as err:
        get_executor("slurm", {"partion": "gpu"})
    # said as a sentence (no pydantic dump), with the keys there are
    assert "partion: not an option of this executor" in err.value.message and "pydantic" not in err.value.message
    assert "partition" in (err.value.fix or "") and "time_limit" in (err.value.fix or "")
    slurm = get_executor("slurm", {"partition": "gpu", "time_limit": "04:00:00"})
    assert isinstance(slurm, SlurmExecutor) and slurm.options == SlurmOptions(partition="gpu", time_limit="04:00:00")
    with pytest.raises(ConfigError, match="invalid local executor options"):
        get_executor("local", {"cwd": 3, "image": True})
    # the key is right, its value is not: the fix says what that option is, not every key there is
    with pytest.raises(ConfigError, match="time_limit '90min' is not a Slurm time limit") as bad:
        get_executor("slurm", {"time_limit": "90min", "poll_s": "often"})
    fix = bad.value.fix or ""
    assert fix.startswith("time_limit is ") and "; poll_s is the squeue polling interval" in fix, fix
    assert "partition" not in fix and "KEY one of" not in fix
    # a list option given a bare word (`--executor-option exclude=vm`): the fix spells the form it takes
    with pytest.raises(ConfigError, match="exclude: Input should be a valid tuple") as bare:
        get_executor("slurm", {"exclude": "vm"})
    assert "(a list: --executor-option 'exclude=[a,b]')" in (bare.value.fix or ""), bare.value.fix
    listed = get_executor("slurm", {"exclude": ["vm"]})  # as `exclude=[vm]` reads
    assert isinstance(listed, SlurmExecutor) and listed.options.exclude == ("vm",)


def test_a_misspelt_option_names_the_one_meant() -> None:
    """`partiton=gpu` at 2 a.m.: the option meant, with the value given, not only the list of every key."""
    with pytest.raises(ConfigError) as err:
        get_executor("slurm", {"partiton": "gpu"})
    assert "partiton: not an option of this executor; did you mean `partition`?" in err.value.message
    assert (err.value.fix or "").startswith("--executor-option partition=gpu; "), err.value.fix
    with pytest.raises(ConfigError) as docker:  # a misspelling and a bad value at once: both fixes
        get_executor("docker", {"shm_sise": "1g", "stop_timeout_s": -1})
    assert "did you mean `shm_size`?" in docker.value.message, docker.value.message
    fix = docker.value.fix or ""
    assert "--executor-option shm_size=1g" in fix and "stop_timeout_s is" in fix, fix
    with pytest.raises(ConfigError) as nested:  # inside a mapping option: renamed there
        get_executor("slurm", {"node": {"srunn": "/opt/slurm/bin/srun"}})
    assert "node.srunn: not an option of this executor; did you mean `srun`?" in nested.value.message
    assert "rename `srunn` to `srun` in `node`" in (nested.value.fix or ""), nested.value.fix


@pytest.mark.parametrize(("key", "value"), [("poll_s", -1), ("poll_s", float("nan")), ("poll_s", float("inf")),
                                            ("cancel_wait_s", -5), ("command_timeout_s", 0), ("cpus_per_task", -4),
                                            ("max_poll_failures", 0), ("import_timeout_s", 0)])
def test_a_number_slurm_cannot_use_is_refused_before_any_job_is_submitted(key: str, value: float) -> None:
    """`poll_s=-1` used to submit the batch job, then die in `time.sleep(-1)` with a traceback (cancelling it);
    `cpus_per_task=-4` or `command_timeout_s=0` failed the run (exit 1) at sbatch: bad input, refused up front."""
    with pytest.raises(ConfigError, match=rf"invalid slurm executor options: {key}: Input should be"):
        get_executor("slurm", {key: value})


def test_a_docker_stop_timeout_must_be_a_positive_finite_number() -> None:
    for value in (-1, 0, float("nan")):
        with pytest.raises(ConfigError, match="stop_timeout_s: Input should be"):
            get_executor("docker", {"stop_timeout_s": value})


def test_the_cli_offers_exactly_the_registered_kinds() -> None:
    from llmsweep.cli.run import run

    (option,) = [p for p in run.params if p.name == "executor"]
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == executor_kinds()
    assert option.default == "local"


class _NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(executor_mod, "_EXECUTORS", dict(executor_mod._EXECUTORS))
    yield


def test_a_new_executor_is_one_registered_class(clean_registry: None) -> None:
    @register_executor
    class RecordingExecutor:
        kind: ClassVar[str] = "recording"
        summary: ClassVar[str] = "nowhere: records the groups it was given"
        options_model: ClassVar[type[BaseModel]] = _NoOptions
        lifecycle_here: ClassVar[bool] = True

        def __init__(self, options: object = None) -> None:
            self.options = _NoOptions.model_validate(options or {})
            self.placed: list[str] = []

        def image_mounts(self) -> tuple[ImageMount, ...] | None:
            return None

        def run_groups(self, groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                       event: Event) -> list[JobOutcome]:
            self.placed.extend(g.id for g in groups)
            return []

    assert "recording" in executor_kinds()
    assert isinstance(get_executor("recording"), RecordingExecutor)
    with pytest.raises(ValueError, match="registered twice"):
        register_executor(type("Other", (RecordingExecutor,), {}))


@pytest.mark.parametrize(("kind", "given", "meant", "said"), [
    ("slurm", {"stop_timeout_s": -1}, "import_timeout_s", "it does not take -1: Input should be greater than 0"),
    ("slurm", {"pull_timeout_s": float("inf")}, "import_timeout_s", "it does not take inf: Input should be a finite"),
    ("docker", {"shm_sise": "lots"}, "shm_size", "it does not take lots: "),
])
def test_a_misspelt_option_given_a_value_the_one_meant_refuses_is_not_suggested_with_it(
        kind: str, given: dict[str, object], meant: str, said: str) -> None:
    """`stop_timeout_s=-1` under Slurm suggested `--executor-option import_timeout_s=-1`, itself refused: the fix names
    the option meant with a placeholder, and why the value given is not one of its values."""
    with pytest.raises(ConfigError) as err:
        get_executor(kind, given)
    assert f"did you mean `{meant}`?" in err.value.message, err.value.message
    fix = err.value.fix or ""
    assert fix.startswith(f"--executor-option {meant}=VALUE ({meant} is "), fix
    assert said in fix, fix
    value = str(next(iter(given.values())))
    assert f"{meant}={value}" not in fix and f"{meant}=Infinity" not in fix, fix
