"""The sbatch script and job-id parsing: resources right, outputs in the run dir, no secret, no guessed job id."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError, LaunchError
from llmsweep.execute.pyxis import NODE_LAUNCHER_ENV
from llmsweep.execute.slurm import WORKER_IMPORTS, SlurmOptions, parse_job_id, render_batch_script

SIM = LaunchSpec(engine="sim", argv=("python", "-m", "llmsweep.cli.main", "sim", "serve"), port=0)
VLLM = LaunchSpec(engine="vllm", image="nvcr.io/nvidia/vllm:25.01", argv=("vllm", "serve", "m"), port=8000, gpus=8,
                  secret_env=("HF_TOKEN",))
OUT = Path("/runs/r1/g0")


def render(spec: LaunchSpec, **options: object) -> str:
    return render_batch_script(spec, SlurmOptions(**options), name="g0", group_file=OUT / "group.json",
                               out_dir=OUT, launcher_file=OUT / "node_launch.json")


def sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_headers_carry_name_partition_account_gres_exclude_time_and_out_files() -> None:
    script = render(VLLM, partition="gpu", account="bench", exclude=("b300-005", "b300-006"), time_limit="08:00:00",
                    gpu_type="h200", squash_dir=Path("/sq"))
    lines = sbatch_lines(script)
    assert lines[:3] == ["--job-name=llmsweep-g0", "--partition=gpu", "--account=bench"]
    for expected in ("--gres=gpu:h200:8", "--exclude=b300-005,b300-006", "--time=08:00:00",
                     f"--output={OUT}/slurm-%j.out", f"--error={OUT}/slurm-%j.err", f"--chdir={OUT}", "--export=ALL"):
        assert expected in lines
    # a failed node ends the batch job (NODE_FAIL, its unfinished jobs failed and said so): Slurm's default requeue
    # ran the worker again from its first job, measuring anew jobs already stored valid
    assert "--no-requeue" in lines
    assert script.startswith("#!/bin/bash\n")


def test_no_gres_for_cpu_jobs_and_defaults_omit_partition() -> None:
    lines = sbatch_lines(render(SIM))
    assert not any(line.startswith(("--gres", "--partition", "--account", "--exclude")) for line in lines)


def test_body_exports_node_launch_file_and_runs_the_worker_last() -> None:
    script = render(SIM, python="/opt/venv/bin/python")
    body = script.splitlines()
    assert f"export {NODE_LAUNCHER_ENV}={OUT}/node_launch.json" in body
    assert body[-1] == f"/opt/venv/bin/python -m llmsweep.cli.main run --_worker {OUT}/group.json --out {OUT}"
    assert "enroot" not in script  # the simulator needs no image


def test_worker_command_is_configurable_and_quoted() -> None:
    script = render(SIM, worker_command=("{python}", "worker.py", "--group={group}", "--note", "two words",
                                         '{"json": 1}', "{launcher}"))
    assert script.splitlines()[-1].endswith(
        f"""worker.py --group={OUT}/group.json --note 'two words' '{{"json": 1}}' {OUT}/node_launch.json""")


def test_image_jobs_import_the_squash_file_before_the_worker() -> None:
    script = render(VLLM, squash_dir=Path("/sq"), import_env={"ENROOT_CACHE_PATH": "/tmp/enroot"}, python="/venv/py")
    imp = script.index("llmsweep_import_image 'docker://nvcr.io#nvidia/vllm:25.01' /sq/nvcr.io+nvidia+vllm+25.01-")
    python_check = script.index("llmsweep_said=$(/venv/py -c 'import sys; print(")
    assert python_check < script.index("export ENROOT_CACHE_PATH=/tmp/enroot") < imp
    assert imp < script.index("llmsweep.cli.main run")
    assert "flock -w 600" in script


def test_image_job_without_squash_dir_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="squash_dir"):
        render(VLLM)


def test_secrets_never_appear_in_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_SLURMsecretVALUE")
    assert "hf_SLURMsecretVALUE" not in render(VLLM, squash_dir=Path("/sq"))


def test_rendered_script_is_valid_bash(tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(render(VLLM, squash_dir=Path("/sq"), exclude=("n1",)))
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True, timeout=30).returncode == 0


@pytest.mark.parametrize("bad", ["/runs/my run", "/runs/100%", "/runs/$HOME", "/runs/it's"])
def test_out_dirs_that_sbatch_lines_cannot_carry_are_rejected(bad: str) -> None:
    with pytest.raises(ConfigError, match="cannot carry"):
        render_batch_script(SIM, SlurmOptions(), name="g", group_file=Path("/g.json"), out_dir=Path(bad),
                            launcher_file=Path("/n.json"))


@pytest.mark.parametrize(("field", "value"), [
    ("account", "ml\ntouch /tmp/owned"), ("partition", "gpu --wrap=x"), ("mem", "64G\t"), ("time_limit", ""),
    ("extra_sbatch", ["--qos=high", "--comment=a\nrm -rf ~"]), ("exclude", ["n1", "n2 n3"]),
])
def test_options_an_sbatch_line_cannot_carry_are_refused_naming_the_field(field: str, value: object) -> None:
    """A newline in an option would end the #SBATCH block and run the rest as a command (and silently drop every
    later directive); whitespace would drop the rest of the line. Both are refused before anything is written."""
    from llmsweep.execute.registry import get_executor

    with pytest.raises(ConfigError, match=f"{field}.*whitespace or control characters"):
        get_executor("slurm", {field: value})
    assert sbatch_lines(render(SIM, extra_sbatch=("--qos=high", "--constraint=h200|h100")))[-2:] == [
        "--qos=high", "--constraint=h200|h100"]


@pytest.mark.parametrize(("stdout", "job_id"), [("1234\n", "1234"), ("77;cluster-a\n", "77"),
                                                ("sbatch: warning: x\n4321\n", "4321")])
def test_job_id_parsed_from_parsable_output(stdout: str, job_id: str) -> None:
    assert parse_job_id(stdout) == job_id


@pytest.mark.parametrize("stdout", ["", "\n", "Submitted batch job 12", "abc", "12 13"])
def test_empty_or_odd_sbatch_output_is_an_error_never_a_guess(stdout: str) -> None:
    with pytest.raises(LaunchError, match="not a job id"):
        parse_job_id(stdout)


@pytest.mark.parametrize(("worker", "imports"), [
    (None, "llmsweep.cli.main"),  # the default worker
    (["{python}", "-u", "-X", "dev", "-m", "my.worker", "{group}"], "my.worker"),
    (["numactl", "-m", "0", "{python}", "-m", "llmsweep.cli.main", "run"], "llmsweep.cli.main"),  # a wrapper's -m
    (["srun", "-m", "block:cyclic", "{python}", "/opt/worker.py", "{group}"], None),  # a script: its own sys.path
])
def test_the_node_python_check_imports_the_module_the_worker_runs(tmp_path: Path, worker: list[str] | None,
                                                                  imports: str | None) -> None:
    """The check imports what `{python} -m MODULE` runs, never a wrapper's `-m` value (`numactl -m 0` made every
    batch job fail on `import 0`); a worker running a script gets the version check only."""
    options = SlurmOptions() if worker is None else SlurmOptions(worker_command=worker)
    script = render_batch_script(LaunchSpec(engine="sim", argv=("x",), port=1), options, name="g",
                                 group_file=tmp_path / "g.json", out_dir=tmp_path, launcher_file=tmp_path / "l.json")
    checks = [line for line in script.splitlines() if line.startswith("if ! llmsweep_import=$(")]
    if imports is None:
        assert checks == [] and "sys.version_info < (3, 11)" in script
    else:
        # the modules imported, in turn, as the words after the check's code: the worker's first
        assert len(checks) == 1 and "-c 'import importlib, sys" in checks[0], checks
        words = script[script.index(checks[0]):].split(" 2>&1); then")[0].rsplit("'", 1)[1].split()
        assert words == [imports, *WORKER_IMPORTS], words


def test_the_batch_job_stops_the_servers_its_worker_left_as_it_ends(tmp_path: Path) -> None:
    """With `node.use_srun: false` the worker starts the server itself, in its own session; a worker killed (out of
    memory) left it running after the job had left the queue, reparented to init where Slurm's process tracking does
    not follow it. The script's EXIT trap stops every process group its pid files name."""
    import json
    import os
    import signal
    import time

    out = tmp_path / "g0"
    out.mkdir()
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a server: its own session and group
    try:
        (out / "server.pid").write_text(json.dumps({"pid": server.pid, "argv0": "sleep", "start_ticks": 1}))
        (out / "server.2.pid").write_text("not json")  # a damaged file is passed over
        script = render_batch_script(SIM, SlurmOptions(worker_command=("false",)), name="g0",
                                     group_file=out / "group.json", out_dir=out, launcher_file=out / "launch.json")
        (out / "job.sbatch").write_text(script)
        done = subprocess.run(["bash", str(out / "job.sbatch")], env={**os.environ, "SLURM_JOB_ID": "9"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0  # the worker failed, as the killed one did
        for _ in range(50):
            if server.poll() is not None:
                break
            time.sleep(0.1)
        assert server.poll() == -signal.SIGTERM, "the server the worker left must not outlive the batch job"
        assert (out / "slurm-9.rc").read_text().strip() == "1"
    finally:
        if server.poll() is None:
            server.kill()


def test_sbatch_input_variables_do_not_override_what_the_script_sets(caplog: pytest.LogCaptureFixture) -> None:
    """Slurm takes `SBATCH_*` input variables over the script's `#SBATCH` lines: a site's `SBATCH_TIMELIMIT` cut every
    batch job's `--time`, `SBATCH_EXPORT=NONE` left the worker without the driver's environment, `SBATCH_REQUEUE`
    undid `--no-requeue`. Those the script sets are not passed, said once; the others are (a site's default QOS)."""
    import logging

    from llmsweep.execute.slurm import sbatch_environment

    script = render(SIM, partition="gpu", time_limit="02:00:00")
    environ = {"PATH": "/bin", "SBATCH_TIMELIMIT": "00:05:00", "SBATCH_EXPORT": "NONE", "SBATCH_REQUEUE": "1",
               "SBATCH_PARTITION": "debug", "SBATCH_QOS": "normal", "SBATCH_ACCOUNT": "team"}
    with caplog.at_level(logging.WARNING, logger="llmsweep.execute.slurm"):
        env = sbatch_environment(script, environ)
    assert env == {"PATH": "/bin", "SBATCH_QOS": "normal", "SBATCH_ACCOUNT": "team"}  # no --qos, no --account set
    said = caplog.text
    assert "SBATCH_TIMELIMIT=00:05:00 in the environment is not passed" in said and "--time" in said


def test_sbatch_input_variables_the_driver_depends_on_are_never_passed(caplog: pytest.LogCaptureFixture) -> None:
    """What `extra_sbatch` may not say, the environment may not either: `SBATCH_OUTPUT`/`SBATCH_ERROR` moved the
    files the driver reads, `SBATCH_CLUSTERS` sent the job to a cluster the driver does not poll or cancel on,
    `SBATCH_WAIT` held sbatch past its timeout, `SBATCH_ARRAY_INX` made an array of the job group."""
    import logging

    from llmsweep.execute.slurm import sbatch_environment

    script = render(SIM)
    dropped = {"SBATCH_OUTPUT": "/elsewhere/o", "SBATCH_ERROR": "/elsewhere/e", "SBATCH_CLUSTERS": "other",
               "SLURM_CLUSTERS": "other", "SBATCH_WAIT": "1", "SBATCH_ARRAY_INX": "0-3", "SLURM_NTASKS": "8"}
    with caplog.at_level(logging.WARNING, logger="llmsweep.execute.slurm"):
        env = sbatch_environment(script, {"PATH": "/bin", "SBATCH_QOS": "normal", **dropped})
    assert env == {"PATH": "/bin", "SBATCH_QOS": "normal"}
    # why, as extra_sbatch's refusal of the option says it
    assert "SBATCH_CLUSTERS=other in the environment is not passed: it stands for --clusters: the driver polls" \
        in caplog.text, caplog.text


HOSTILE_MODULE = "x$(touch {marker})`touch {marker}.tick`"


def test_a_worker_module_that_is_not_a_module_name_is_refused_naming_the_option(tmp_path: Path) -> None:
    """The worker's `-m MODULE` reached the batch script's python check; one holding `$(...)` ran it on the node.
    It is refused when the options are read, naming worker_command and what to give."""
    from llmsweep.execute.registry import get_executor

    worker = ["{python}", "-m", HOSTILE_MODULE.format(marker=tmp_path / "pwned"), "{group}"]
    with pytest.raises(ConfigError, match=r"worker_command runs `-m x\$\(touch.*not a Python module name") as err:
        get_executor("slurm", {"worker_command": worker})
    assert "worker_command" in (err.value.fix or "")
    SlurmOptions(worker_command=("{python}", "-m", "my_pkg.worker2", "{group}"))  # a dotted name is taken


def test_the_python_check_says_the_worker_module_without_running_it(tmp_path: Path) -> None:
    """Whatever reaches the renderer (options built without validation), the module is never shell syntax in the
    script: the check's line says it literally and nothing in it runs."""
    import os
    import sys

    marker = tmp_path / "pwned"
    module = HOSTILE_MODULE.format(marker=marker)
    options = SlurmOptions.model_construct(python=sys.executable, worker_command=("{python}", "-m", module, "{g}"))
    script = render_batch_script(SIM, options, name="g0", group_file=tmp_path / "group.json", out_dir=tmp_path,
                                 launcher_file=tmp_path / "launch.json")
    (tmp_path / "job.sbatch").write_text(script)
    done = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env={**os.environ, "SLURM_JOB_ID": "9"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 65, done.stderr  # PYTHON_CHECK_EXIT: the module cannot be imported
    assert not marker.exists() and not Path(f"{marker}.tick").exists(), "the module name ran as a command"
    assert f"cannot import {module} (" in done.stderr, done.stderr


def test_the_python_check_imports_every_dependency_a_worker_job_needs() -> None:
    """The check imported only the worker's module, which imports llmsweep's dependencies only as a job runs: a
    Python without prometheus_client or aiohttp passed it, and every job failed with an internal error. What the
    check imports (`WORKER_IMPORTS`, after the worker's module) brings in every dependency llmsweep declares, but
    rich (the driver's console: a worker reports to a file) and orjson (optional: `jsonline` falls back to json)."""
    import importlib.metadata as metadata
    import os
    import sys

    from llmsweep.execute.slurm import DEFAULT_WORKER_COMMAND, _worker_module

    try:
        requires = metadata.requires("llmsweep") or []
    except metadata.PackageNotFoundError:
        pytest.skip("llmsweep is not installed here: its declared dependencies cannot be read")
    dists = {re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower().replace("_", "-")
             for r in requires if "extra ==" not in r}
    by_dist: dict[str, set[str]] = {}
    for module, names in metadata.packages_distributions().items():
        for name in names:
            by_dist.setdefault(name.lower().replace("_", "-"), set()).add(module)
    needed = {d for d in dists if d not in ("rich", "orjson")}
    assert {"aiohttp", "prometheus-client", "numpy", "pydantic", "click"} <= needed, needed
    modules = [str(_worker_module(DEFAULT_WORKER_COMMAND)), *WORKER_IMPORTS]
    code = ("import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
            "print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))")
    src = str(Path(__file__).resolve().parents[3] / "src")
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": src}, check=True)
    loaded = set(done.stdout.split())
    missed = sorted(d for d in needed if not by_dist.get(d, set()) & loaded)
    assert not missed, f"the check's imports ({modules}) do not bring in {missed}"


@pytest.mark.parametrize("key", ["ENROOT CACHE", "A=B", "PATH=/tmp/evil:", "1X", "X+", ""])
def test_an_import_env_key_that_is_not_a_variable_name_is_refused_naming_it(key: str) -> None:
    """The batch script exports every import_env entry: `{"A=B": "c"}` rendered `export A=B=c` (A set to B=c) and
    `{"ENROOT CACHE": "/x"}` an export that fails under `set -e`, killing the job after it waited in the queue."""
    from llmsweep.execute.registry import get_executor

    with pytest.raises(ConfigError, match=f"import_env.{re.escape(key)}: .* is not a shell variable name"):
        get_executor("slurm", {"import_env": {key: "/x"}, "squash_dir": "/sq"})
    script = render(VLLM, squash_dir=Path("/sq"), import_env={"ENROOT_CACHE_PATH": "/x"})
    assert "export ENROOT_CACHE_PATH=/x" in script.splitlines()


@pytest.mark.parametrize(("tokens", "flag", "instead"), [
    (["--export=NONE"], "--export", "import_env"), (["--export", "NONE"], "--export", "import_env"),
    (["--requeue"], "--requeue", "--resume"), (["--output=/elsewhere/o"], "--output", "--out"),
    (["-o", "/elsewhere/o"], "-o (--output)", "--out"), (["-o/elsewhere/o"], "-o (--output)", "--out"),
    (["--out=/elsewhere/o"], "--out (--output)", "--out"), (["-Qo/x"], "-o (--output)", "--out"),
    (["--error", "/e"], "--error", "--out"), (["-e/e"], "-e (--error)", "--out"),
    (["--chdir=/"], "--chdir", "--out"), (["-D", "/"], "-D (--chdir)", "--out"),
    (["--parsable"], "--parsable", "leave it out"),
    (["--clusters=c2"], "--clusters", "login node"), (["-M", "c2"], "-M (--clusters)", "login node"),
    (["--cluster", "c2"], "--cluster (--clusters)", "login node"),
    (["--array=0-3"], "--array", "--repeats"), (["-a", "0-3"], "-a (--array)", "--repeats"),
    (["--nodes=2"], "--nodes", "leave it out"), (["-N", "2"], "-N (--nodes)", "leave it out"),
    (["--ntasks=4"], "--ntasks", "leave it out"), (["-n4"], "-n (--ntasks)", "leave it out"),
    (["--ntasks-per-node", "2"], "--ntasks-per-node", "leave it out"),
    (["--wait"], "--wait", "the driver waits"), (["-W"], "-W (--wait)", "the driver waits"),
    (["--qos=high", "--export=NONE"], "--export", "import_env"),
    (["--gres=gpu:4"], "--gres", "gpu_type"), (["--gres", "nvme:1"], "--gres", "gpu_type"),
    (["--gpus=8"], "--gpus", "gpu_type"), (["-G", "8"], "-G (--gpus)", "gpu_type"),
    (["--gpus-per-node=8"], "--gpus-per-node", "gpu_type"), (["--gpus-per-task", "1"], "--gpus-per-task", "gpu_type"),
])
def test_extra_sbatch_that_overrides_what_the_script_depends_on_is_refused(tokens: list[str], flag: str,
                                                                           instead: str) -> None:
    """sbatch takes the last of an option given twice, and extra_sbatch comes after the script's own lines: an
    `--export=NONE` left the worker without its environment, `--requeue` measured stored jobs again, `--output`/
    `--error` hid the logs the driver reads, `-M` put the job where the driver's squeue/scancel never look (Ctrl-C
    left it running). Each is refused naming the flag, extra_sbatch, and what to do instead."""
    from llmsweep.execute.registry import get_executor

    with pytest.raises(ConfigError) as err:
        get_executor("slurm", {"extra_sbatch": tokens})
    said = err.value.message
    offending = [t for t in tokens if t.startswith("-")][-1]  # (after a flag the script does not own)
    assert f"extra_sbatch {offending!r}: " in said, said
    assert f": {flag} overrides what the batch script depends on" in said, said
    assert instead in said, said


@pytest.mark.parametrize("tokens", [
    ["--qos=high"], ["--qos", "high"], ["--constraint=h200"], ["--nodelist=n1"], ["-w", "n1"], ["--no-requeue"],
    ["--ntasks-per-gpu=1"], ["--export-file=/e"], ["--time", "30"], ["-t30"], ["-J", "name"], ["-koff"], ["-Q"],
    ["--open-mode=append"], ["--wait-all-nodes=1"], ["-p", "debug"], ["--comment=nodes"],
    ["--gres-flags=enforce-binding"], ["--gpu-bind=closest"], ["--cpus-per-gpu=8"], ["--mem-per-gpu=64G"],
])
def test_extra_sbatch_the_script_does_not_depend_on_is_taken(tokens: list[str]) -> None:
    assert SlurmOptions(extra_sbatch=tokens).extra_sbatch == tuple(tokens)


def test_an_sbatch_gres_refusal_names_the_gpu_type_option() -> None:
    """sbatch's words for a GPU type the cluster does not have (what `gpu_type` renders into `--gres`) map to the
    option to change: the e2e refusal test reaches Slurm with a partition and memory, since a simulated job asks for
    no GPUs and `extra_sbatch` may no longer give a `--gres` of its own."""
    from llmsweep.execute.slurm import refused_fix

    fix = refused_fix("sbatch: error: Invalid generic resource (gres) specification\n")
    assert fix is not None and "--executor-option gpu_type=TYPE" in fix and "sinfo -o '%P %G'" in fix
