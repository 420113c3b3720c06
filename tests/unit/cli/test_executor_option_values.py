"""`--executor-option KEY=VALUE` values are read as YAML; one that is not YAML (a brace the shell split off, an
unclosed list) is refused naming the option and how to quote it (exit 2), not a yaml.ParserError traceback after the
run had planned its jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.cli.options import executor_options
from llmsweep.errors import ConfigError

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize("pair", ["node={srun:", "exclude=[a", "partition='gpu", "import_env={A: 1"])
def test_a_value_that_is_not_yaml_is_a_config_error_naming_it(pair: str) -> None:
    with pytest.raises(ConfigError) as err:
        executor_options((pair,))
    assert f"--executor-option {pair!r}" in err.value.message and "is not YAML" in err.value.message
    assert "quote the whole option" in (err.value.fix or "")


def test_values_still_read_as_yaml() -> None:
    assert executor_options(("exclude=[a, b]", "poll_s=0.5", "node={use_srun: false}")) == {
        "exclude": ["a", "b"], "poll_s": 0.5, "node": {"use_srun": False}}


def test_run_refuses_it_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["run", str(RECIPE), "--live", "--executor", "slurm", "--executor-option",
                                   "node={srun:", "--out", str(out), "--store", str(tmp_path / "s.sqlite")])
    assert isinstance(res.exception, ConfigError), res.exception  # exit 2 through `main`, said once
    assert not out.exists()


@pytest.mark.parametrize(("options", "field"), [("slurm", "pending_note_s"), ("docker", "pull_timeout_s")])
def test_an_infinite_limit_is_refused_as_every_other_finite_one_is(options: str, field: str) -> None:
    """`pending_note_s=.inf` was taken (a pending job never reported) and so was an endless `docker pull`, while
    `poll_s=.inf` was refused."""
    from pydantic import ValidationError

    from llmsweep.execute.docker import DockerOptions
    from llmsweep.execute.slurm import SlurmOptions

    model = SlurmOptions if options == "slurm" else DockerOptions
    with pytest.raises(ValidationError, match="finite number"):
        model.model_validate({field: float("inf")})


@pytest.mark.parametrize(("pair", "said", "fix"), [
    ("docker=/nonexistent/docker", "CLI `/nonexistent/docker` (executor option docker) does not exist",
     "--executor-option docker=PATH"),
    ("shm_size=lots", "shm_size: Value error, 'lots' is not a size `docker run --shm-size` reads", "shm_size is"),
    ("workdir=rel dir", "workdir: Value error, 'rel dir' is not an absolute path", "workdir is"),
])
def test_a_docker_option_docker_would_refuse_is_refused_before_anything_runs(tmp_path: Path, pair: str, said: str,
                                                                             fix: str) -> None:
    """`docker=/nonexistent/docker` failed each job with "check the docker daemon"; `shm_size=lots` and a relative
    `workdir` failed at `docker run` (exit 125, the run's exit 1). Each is bad input: exit 2 naming the option."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["run", str(RECIPE), "--executor", "docker", "--executor-option", pair,
                                   "--out", str(out), "--store", str(tmp_path / "s.sqlite")])
    assert isinstance(res.exception, ConfigError), res.exception  # exit 2 through `main`, said once
    assert said in res.exception.message, res.exception.message
    assert fix in (res.exception.fix or ""), res.exception.fix
    assert not out.exists()


def test_docker_sizes_docker_reads_are_taken() -> None:
    from llmsweep.execute.docker import DockerOptions

    for size in ("16g", "1.5g", "64MiB", "64 m", "2T", "16gb"):
        assert DockerOptions(shm_size=size).shm_size == size
    assert DockerOptions.model_validate({"shm_size": 100}).shm_size == "100"  # `shm_size=100`: bytes, as docker reads
    assert DockerOptions(workdir="/srv/my dir").workdir == "/srv/my dir"
