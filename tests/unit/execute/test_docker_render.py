"""`docker run` rendering: the flags each vendor needs, the harness at /llmsweep, secrets by name only."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from llmsweep.engines.launch import LaunchFile, LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.base import ServedIn
from llmsweep.execute.docker import DockerLauncher, DockerOptions, container_name, render_docker_run
from llmsweep.execute.ready import wait_ready
from llmsweep.execute.registry import get_executor

TOKEN = "hf_DOCKERsecretVALUE123"
SPEC = LaunchSpec(
    engine="sglang",
    image="lmsysorg/sglang:v0.5.6-cu129",
    argv=("python3", "-m", "sglang.launch_server", "--model-path", "/models/llama", "--port", "8888"),
    env={"SGLANG_SIMULATE_ACC_TOKEN_MODE": "1", "NCCL_DEBUG": "WARN"},
    secret_env=("HF_TOKEN",),
    port=8888,
    gpus=8,
)


def flag_value(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def render(environ: dict[str, str] | None = None, **options: object) -> list[str]:
    return render_docker_run(SPEC, DockerOptions(**options), "llmsweep-sglang-test", environ or {})


def test_nvidia_render_has_host_network_ipc_shm_gpus_and_unique_name() -> None:
    argv = render(shm_size="32g", hf_cache=Path("/data/hf"), model_dir=Path("/models"))
    # no `--rm`: the container outlives its exit, so its State can say why it ended; the handle's stop removes it
    assert argv[:3] == ["docker", "run", "--init"] and "--rm" not in argv
    for flag in ("--init", "--network=host", "--ipc=host", "--shm-size=32g"):
        assert flag in argv
    assert flag_value(argv, "--name") == ["llmsweep-sglang-test"]
    assert flag_value(argv, "--gpus") == ["all"]
    assert "--device" not in argv
    assert flag_value(argv, "-v") == ["/data/hf:/data/hf", "/models:/models:ro"]


@pytest.mark.parametrize(("visible", "expected"), [("4,5,6,7", '"device=4,5,6,7"'), ("2", '"device=2"'),
                                                 ("GPU-3f2a,GPU-77c1", '"device=GPU-3f2a,GPU-77c1"'), ("", "all")])
def test_the_container_gets_the_gpus_the_host_makes_visible(visible: str, expected: str) -> None:
    """A local server inherits CUDA_VISIBLE_DEVICES and the power sampler reads those GPUs: the container must run
    on the same ones, not on GPUs 0..N-1 of all of them (docker's CLI reads `--gpus` as CSV, hence the quotes)."""
    argv = render({"CUDA_VISIBLE_DEVICES": visible})
    assert flag_value(argv, "--gpus") == [expected]
    assert not any(a.startswith("CUDA_VISIBLE_DEVICES") for a in flag_value(argv, "-e"))  # renumbered from 0 inside


def test_a_recipes_own_cuda_visible_devices_selects_the_containers_gpus() -> None:
    spec = SPEC.model_copy(update={"env": {**SPEC.env, "CUDA_VISIBLE_DEVICES": "6,7"}})
    argv = render_docker_run(spec, DockerOptions(), "n", {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert flag_value(argv, "--gpus") == ['"device=6,7"']
    assert not any(a.startswith("CUDA_VISIBLE_DEVICES") for a in flag_value(argv, "-e"))


def test_the_gpu_order_this_shell_sets_reaches_the_container(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A shell's `CUDA_DEVICE_ORDER=PCI_BUS_ID` makes the preflight add none to the server's env (a local server
    inherits the shell's) and is what it checked the GPUs in; a container inherits nothing of the host's, so docker
    passes it in, or the engine would count the GPUs fastest first (on a host of a display GPU beside an H100,
    device 0 would be the H100, not the GPU checked, named and sampled). The recipe's own order wins."""
    from llmsweep.execute.preflight import preflight

    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nprintf 'GPU 0: NVIDIA RTX A2000 (UUID: GPU-a)\\nGPU 1: NVIDIA H100 80GB HBM3 "
                    "(UUID: GPU-b)\\n'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    shell = {"PATH": str(tmp_path), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = LaunchSpec(engine="vllm", image="vllm/vllm-openai:v0.10.0", argv=("vllm", "serve", "m", "--port", "0"),
                      port=0, gpus=1)
    checked = preflight(spec, environ=shell)
    assert checked.env == {}  # the shell's order is the server's: the preflight adds none
    argv = render_docker_run(checked, DockerOptions(), "n", shell)
    assert [e for e in flag_value(argv, "-e") if e.startswith("CUDA_DEVICE_ORDER")] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID"]
    ordered = preflight(spec, environ={"PATH": str(tmp_path)})  # no order in the shell: the preflight's
    argv = render_docker_run(ordered, DockerOptions(), "n", {"PATH": str(tmp_path)})
    assert [e for e in flag_value(argv, "-e") if e.startswith("CUDA_DEVICE_ORDER")] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID"]
    recipe = render_docker_run(spec.model_copy(update={"env": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}}), DockerOptions(),
                               "n", {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert [e for e in flag_value(recipe, "-e") if e.startswith("CUDA_DEVICE")] == ["CUDA_DEVICE_ORDER=PCI_BUS_ID"]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" not in flag_value(render(shell, gpu_vendor="amd"), "-e")  # not CUDA's


@pytest.mark.parametrize("visible", ['0",capabilities=utility,"1', "0 1", "0,,1", "0;1"])
def test_a_visible_devices_value_that_is_not_a_device_list_is_refused(visible: str) -> None:
    """docker reads `--gpus` as CSV: quotes or commas in the value would add docker options of their own."""
    with pytest.raises(ConfigError, match="not a list of GPU indices or UUIDs"):
        render({"CUDA_VISIBLE_DEVICES": visible})


def test_amd_containers_get_the_hosts_visible_devices_passed_in() -> None:
    argv = render({"ROCR_VISIBLE_DEVICES": "1,3", "HIP_VISIBLE_DEVICES": " "}, gpu_vendor="amd")
    assert "ROCR_VISIBLE_DEVICES=1,3" in flag_value(argv, "-e")
    assert not any(a.startswith("HIP_VISIBLE_DEVICES") for a in flag_value(argv, "-e"))
    overridden = render_docker_run(SPEC.model_copy(update={"env": {"ROCR_VISIBLE_DEVICES": "0"}}),
                                   DockerOptions(gpu_vendor="amd"), "n", {"ROCR_VISIBLE_DEVICES": "1,3"})
    assert [e for e in flag_value(overridden, "-e") if e.startswith("ROCR")] == ["ROCR_VISIBLE_DEVICES=0"]


def test_init_forwards_signals_unless_turned_off() -> None:
    """The engine is not PID 1 (which ignores signals left at their default action) unless the host asks for it."""
    assert render().count("--init") == 1
    assert "--init" not in render(init=False)


def test_amd_render_passes_kfd_dri_video_and_seccomp() -> None:
    argv = render(gpu_vendor="amd")
    assert flag_value(argv, "--device") == ["/dev/kfd", "/dev/dri"]
    assert flag_value(argv, "--group-add") == ["video"]
    assert flag_value(argv, "--security-opt") == ["seccomp=unconfined"]
    assert "--gpus" not in argv


@pytest.mark.parametrize("vendor", ["nvidia", "amd"])
def test_cpu_only_servers_get_no_gpu_flags(vendor: str) -> None:
    argv = render_docker_run(SPEC.model_copy(update={"gpus": 0}), DockerOptions(gpu_vendor=vendor), "n")
    assert "--gpus" not in argv and "--device" not in argv and "--ipc=host" in argv


def test_harness_is_mounted_at_llmsweep_never_workspace() -> None:
    argv = render(harness_dir=Path("/home/ci/llmsweep"))
    mounts = flag_value(argv, "-v")
    assert mounts == ["/home/ci/llmsweep:/llmsweep:ro"]
    assert not any("/workspace" in a for a in argv)
    # the README's docker bullet: the harness is mounted only where `harness_dir` names it
    assert not any("/llmsweep" in a for a in render())


def test_a_folder_whose_path_holds_a_colon_is_mounted_with_mount_not_v() -> None:
    """`-v` splits its value at every `:` (docker: "invalid spec: ... too many colons", exit 125): a run whose `--out`
    holds one (`runs/23:15`) could not mount its launch files (TensorRT-LLM's options file), nor an hf_cache or
    model_dir so named be mounted. Such a folder goes in as `--mount`, its fields CSV-quoted as docker reads them;
    any other still as `-v`."""
    import csv

    spec = SPEC.model_copy(update={"files": (LaunchFile(name="opts.yaml", content="a: 1\n"),),
                                   "files_dir": "/runs/23:15/servers/g"})
    argv = render_docker_run(spec, DockerOptions(hf_cache=Path("/data/hf:2024,a"), model_dir=Path("/models")), "n")
    assert flag_value(argv, "-v") == ["/models:/models:ro"]
    fields = [next(csv.reader([value])) for value in flag_value(argv, "--mount")]
    assert fields == [["type=bind", "source=/data/hf:2024,a", "target=/data/hf:2024,a"],
                      ["type=bind", "source=/runs/23:15/servers/g", "target=/runs/23:15/servers/g", "readonly"]]
    assert "HF_HUB_CACHE=/data/hf:2024,a" in flag_value(argv, "-e")


def test_env_by_value_secrets_by_name_and_no_secret_value_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    argv = render()
    envs = flag_value(argv, "-e")
    assert "SGLANG_SIMULATE_ACC_TOKEN_MODE=1" in envs and "NCCL_DEBUG=WARN" in envs
    assert "HF_TOKEN" in envs  # by name: docker takes the value from its own environment
    assert not any(TOKEN in a for a in argv)


def test_entrypoint_image_then_arguments() -> None:
    argv = render(extra_args=("--privileged",))
    i = argv.index("--entrypoint")
    assert argv[i:] == ["--entrypoint", "python3", "lmsysorg/sglang:v0.5.6-cu129", "-m", "sglang.launch_server",
                        "--model-path", "/models/llama", "--port", "8888"]
    assert argv.index("--privileged") < i


def test_a_container_is_labelled_with_its_server_folder_log_group_and_role_after_its_name(tmp_path: Path) -> None:
    """What `--resume` finds a container by when nothing else names it (`docker.left_containers`), and what names
    it to a user (`docker ps --filter label=llmsweep.group=…`, the removal's console line): its server group and the
    role it serves; after the name, so that a command line's removal (`removal_of`, for a CLI found by its folder
    mark) still reads it."""
    from llmsweep.execute.docker import container_labels, removal_of

    log_path = tmp_path / "run" / "servers" / "g" / "decode-0.log"
    argv = render_docker_run(SPEC, DockerOptions(), "llmsweep-sglang-0a1b2c3d4e", {},
                             container_labels(log_path))
    folder = log_path.parent.resolve()
    at = argv.index("--name")
    assert argv[at + 2:at + 10] == ["--label", "llmsweep.group=g",
                                    "--label", f"llmsweep.log={folder / 'decode-0.log'}",
                                    "--label", "llmsweep.role=decode-0",
                                    "--label", f"llmsweep.server-dir={folder}"]
    assert removal_of(argv) == ["docker", "rm", "-f", "llmsweep-sglang-0a1b2c3d4e"]


@pytest.mark.parametrize(("log_name", "role"), [
    ("server.log", "server"), ("server.3.log", "server"), ("prefill-0.log", "prefill-0"),
    ("decode-1.2.log", "decode-1"), ("router-0.log", "router-0")])
def test_a_containers_role_label_is_its_launch_without_the_relaunch_number(log_name: str, role: str) -> None:
    from llmsweep.execute.docker import ROLE_LABEL, container_labels

    assert container_labels(Path("/out/servers/g") / log_name)[ROLE_LABEL] == role


def test_a_label_value_reaches_docker_as_one_word_whatever_the_folder_holds(tmp_path: Path) -> None:
    """A server folder under an `--out` spelt with spaces, quotes, `=`, `$(…)` or `;` is one argv word
    (`--label KEY=VALUE`: docker splits at the first `=`), never read by a shell; the command written beside the
    results quotes it so a pasted line gives docker the same words."""
    import shlex

    from llmsweep import shell
    from llmsweep.execute.docker import LABEL_NAMESPACE, SERVER_DIR_LABEL, container_labels

    odd = tmp_path / "a b'c\"=$(touch x); d" / "servers" / "g"
    labels = container_labels(odd / "server.log")
    assert all(key.startswith(LABEL_NAMESPACE) for key in labels)
    argv = render_docker_run(SPEC, DockerOptions(), "llmsweep-sglang-0a1b2c3d4e", {}, labels)
    word = f"{SERVER_DIR_LABEL}={odd.resolve()}"
    assert argv[argv.index(word) - 1] == "--label"
    assert shlex.split(shell.join(argv)) == argv


def test_container_names_are_unique_and_docker_safe() -> None:
    names = {container_name(SPEC.model_copy(update={"engine": "trt llm/x"})) for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("llmsweep-trt-llm-x-") and " " not in n and "/" not in n for n in names)


def test_docker_without_image_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="names no image"):
        render_docker_run(SPEC.model_copy(update={"image": None}), DockerOptions(), "n")


def test_options_reject_unknown_fields() -> None:
    with pytest.raises(ConfigError, match="shm"):
        get_executor("docker", {"gpu_vendor": "nvidia", "shm": "1g"})


FAKE_DOCKER = """#!/bin/sh
# Stands in for the docker CLI: records calls; `run` prints what the container would see, then serves; the daemon
# has the container (`container inspect`).
echo "$*" >> "{calls}"
case "$1" in
  run) echo "container sees HF_TOKEN=$HF_TOKEN"; python3 -m http.server --bind 127.0.0.1 "{port}" ;;  # stays `docker`
  container) echo '{{"Status": "running"}}' ;;
  *) exit 0 ;;
esac
"""


def launch_with_stand_in(tmp_path: Path, environ: dict[str, str], *, stop_timeout_s: float = 60.0
                         ) -> tuple[Any, Path, LaunchSpec]:
    """Launch SPEC through DockerLauncher with the docker stand-in; returns the handle, its calls file and the spec."""
    from llmsweep.execute.preflight import pick_free_port

    port = pick_free_port()
    calls = tmp_path / "calls"
    docker = tmp_path / "docker"
    docker.write_text(FAKE_DOCKER.format(calls=calls, port=port))
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    spec = SPEC.model_copy(update={"port": port, "health_path": "/"})
    launcher = DockerLauncher(DockerOptions(docker=str(docker), gpu_vendor="none", stop_timeout_s=stop_timeout_s))
    return launcher.launch(spec, log_path=tmp_path / "server.log", environ=environ), calls, spec


def test_launch_passes_secret_to_the_cli_scrubs_log_and_stops_the_container(tmp_path: Path) -> None:
    handle, calls, _ = launch_with_stand_in(tmp_path, {**os.environ, "HF_TOKEN": TOKEN})
    try:
        wait_ready(handle, timeout_s=20, poll_s=0.1)
    finally:
        handle.stop(grace_s=3)
    assert not handle.is_alive()
    log_text = (tmp_path / "server.log").read_text()
    assert "container sees HF_TOKEN=***" in log_text and TOKEN not in log_text
    recorded = calls.read_text().splitlines()
    name = flag_value(list(handle.command), "--name")[0]
    assert recorded[0].startswith("run --init --network=host --name " + name)
    assert f"stop -t 3 {name}" in recorded and f"rm -f {name}" in recorded


OOM_DOCKER = """#!/bin/sh
# Stands in for the docker CLI of a container the kernel's OOM killer ends while its engine loads the weights.
case "$1" in
  run) echo "Loading safetensors checkpoint shards:  50%"; exit 137 ;;
  container) echo '{"Status": "exited", "Running": false, "OOMKilled": true, "ExitCode": 137}' ;;
  *) exit 0 ;;
esac
"""


def test_a_container_that_dies_while_starting_says_what_ended_it(tmp_path: Path) -> None:
    """The daemon's cause (its State.OOMKilled) was said of a container that died mid-job ("exit status 137: the
    container ran out of memory …") but not of one that died loading its weights, whose failure said only "exited
    with status 137 while starting" over a log of progress bars."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.preflight import pick_free_port
    from llmsweep.execute.ready import exit_text

    docker = tmp_path / "docker"
    docker.write_text(OOM_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    spec = SPEC.model_copy(update={"port": pick_free_port()})
    handle = DockerLauncher(DockerOptions(docker=str(docker), gpu_vendor="none")).launch(
        spec, log_path=tmp_path / "server.log", environ=dict(os.environ))
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=20, poll_s=0.05)
    finally:
        handle.stop(grace_s=1)
    cause = "the container ran out of memory: the kernel's OOM killer ended it (the container's State.OOMKilled)"
    assert f"sglang server exited with status 137 while starting (health {spec.base_url}{spec.health_path}): " \
        f"{cause}" in err.value.message, err.value.message
    assert exit_text(handle) == f"exit status 137: {cause}"  # as a death mid-job says it
    assert "raise the container's memory limit" in (err.value.fix or ""), err.value.fix


@pytest.mark.parametrize(("vendor", "gpus", "in_bus_order"), [("nvidia", 2, True), ("nvidia", 0, False),
                                                               ("amd", 2, False), ("none", 2, False)])
def test_a_container_given_nvidia_gpus_says_its_runtime_numbers_them_in_bus_order(
        tmp_path: Path, vendor: Literal["nvidia", "amd", "none"], gpus: int, in_bus_order: bool) -> None:
    """`--gpus "device=2,0"` gives the container GPUs 0 and 2 as its devices 0 and 1 (CUDA enumerates what it was
    given by bus): the handle says so, and the job records the GPUs in that order (`observe_runtime`). AMD's
    containers see every GPU and read the *_VISIBLE_DEVICES variables as a host process does."""
    from llmsweep.execute.preflight import pick_free_port

    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\nexit 0\n")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    spec = SPEC.model_copy(update={"port": pick_free_port(), "gpus": gpus})
    environ = {**os.environ, "CUDA_VISIBLE_DEVICES": "2,0"}
    handle = DockerLauncher(DockerOptions(docker=str(docker), gpu_vendor=vendor)).launch(
        spec, log_path=tmp_path / "server.log", environ=environ)
    try:
        assert handle.gpus_in_bus_order is in_bus_order
    finally:
        handle.stop(grace_s=1)


def test_a_docker_stop_that_hangs_still_removes_the_container(tmp_path: Path) -> None:
    """`docker stop` past its timeout raised before `docker rm -f` ran, and the container kept running until a later
    `--resume`."""
    handle, calls, _ = launch_with_stand_in(tmp_path, dict(os.environ), stop_timeout_s=2.0)
    docker = Path(handle.command[0])
    name = flag_value(list(handle.command), "--name")[0]
    try:
        wait_ready(handle, timeout_s=20, poll_s=0.1)
        docker.write_text(docker.read_text().replace("*) exit 0 ;;", "stop) sleep 30 ;;\n  *) exit 0 ;;"))
        started = time.monotonic()
        handle.stop(grace_s=0)
    finally:
        handle.process.stop(grace_s=1)
    assert f"rm -f {name}" in calls.read_text().splitlines()
    assert time.monotonic() - started < 25


def test_a_daemon_gone_at_the_teardown_is_a_warning_with_docker_s_words_not_a_traceback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The daemon stopped mid-run: `docker stop` and `docker rm` fail at the teardown, an expected LaunchError the
    handle logged with a full Python traceback, which at 2 a.m. reads as llmsweep crashing. It is one warning line
    with docker's error; the process tree is still killed and the pid file kept (`gone` is false)."""
    handle, _, _ = launch_with_stand_in(tmp_path, dict(os.environ))
    docker = Path(handle.command[0])
    try:
        wait_ready(handle, timeout_s=20, poll_s=0.1)
        text = docker.read_text().replace(
            "*) exit 0 ;;", "*) echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2; "
                            "exit 1 ;;")
        docker.write_text(text)
        with caplog.at_level(logging.WARNING, logger="llmsweep.execute.handle"):
            handle.stop(grace_s=1)
    finally:
        handle.process.stop(grace_s=1)
    assert not handle.is_alive()
    (record,) = [r for r in caplog.records if "pre-stop step failed" in r.getMessage()]
    assert record.exc_info is None and "Cannot connect to the Docker daemon" in record.getMessage()
    assert not handle.gone()  # the container may live on: the pid file and its `docker rm -f` stay for --resume


def test_a_resume_after_a_killed_run_stops_the_docker_cli_and_removes_its_container(tmp_path: Path) -> None:
    """A SIGKILLed driver never runs its teardown, and killing the docker CLI leaves the container running: the pid
    file names the CLI and `docker rm -f NAME`, and `stop_stale_servers` (what `--resume` runs first) does both."""
    from llmsweep.execute.lifecycle import stop_stale_servers, write_pid_file

    handle, calls, spec = launch_with_stand_in(tmp_path, dict(os.environ))
    name = flag_value(list(handle.command), "--name")[0]
    assert handle.cleanup == (str(tmp_path / "docker"), "rm", "-f", name)
    run_dir = tmp_path / "run"
    pid_file = run_dir / "servers" / "g" / "server.pid"
    pid_file.parent.mkdir(parents=True)
    try:
        wait_ready(handle, timeout_s=20, poll_s=0.1)
        write_pid_file(pid_file, handle, spec)  # what the run wrote before it was killed
        events: list[str] = []
        assert stop_stale_servers(run_dir, events.append) == [handle.pid]
    finally:
        handle.process.stop(grace_s=1)
    assert not handle.is_alive() and not pid_file.exists()
    assert f"rm -f {name}" in calls.read_text().splitlines()
    assert any("removing what the interrupted run's server left" in e for e in events)


FAKE_PULL = """#!/bin/sh
# Stands in for the docker CLI's image commands: the image exists once a pull has finished.
case "$1" in
  image) if [ -f "{pulled}" ]; then echo '{{"Id": "sha256:0a1b", "RepoDigests": ["reg.example/x@sha256:d1g"]}}';
         else echo "Error: No such image: $4" >&2; exit 1; fi ;;
  pull) for i in 1 2 3; do sleep {step}; echo "layer$i: Pull complete"; done
        touch "{pulled}"; echo "Digest: sha256:d1g" ;;
  *) exit 3 ;;
esac
"""


def fake_pull_docker(tmp_path: Path, step_s: float) -> Path:
    docker = tmp_path / "docker"
    docker.write_text(FAKE_PULL.format(pulled=tmp_path / "pulled", step=step_s))
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    return docker


def test_an_absent_image_is_pulled_with_progress_then_its_id_and_digest_read(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.execute import docker as docker_mod

    monkeypatch.setattr(docker_mod, "_PULL_PROGRESS_S", 0.3)
    docker = fake_pull_docker(tmp_path, 0.25)
    said: list[str] = []
    facts = docker_mod.ensure_image(str(docker), "reg.example/x:1", log_path=tmp_path / "pull.log", event=said.append)
    assert facts == ServedIn(image="reg.example/x:1", image_id="sha256:0a1b", image_digest="sha256:d1g")
    assert said[0].startswith("pulling reg.example/x:1 (not on this host")
    pulling = re.compile(r"still pulling reg\.example/x:1: (1 layer|\d+ layers) complete after ")
    assert any(pulling.match(s) for s in said[1:-1]), said
    assert said[-1].startswith("pulled reg.example/x:1 in ") and said[-1].endswith("(sha256:d1g)")
    assert (tmp_path / "pull.log").read_text().count("Pull complete") == 3
    # present now: no second pull, nothing said
    assert docker_mod.ensure_image(str(docker), "reg.example/x:1", log_path=tmp_path / "pull2.log",
                                   event=said.append) == facts
    assert not (tmp_path / "pull2.log").exists()


INSPECT_MIRRORED = """#!/bin/sh
# `docker image inspect` of an image pulled from Docker Hub (a multi-arch index) and pushed to a mirror, as a site
# mirrors engine images: one image id, a digest per repository (the daemon lists them sorted).
echo '{"Id": "sha256:0a1b", "RepoDigests": ["lmsysorg/sglang@sha256:hubindex", "registry.corp/sglang@sha256:mirror"]}'
"""


@pytest.mark.parametrize(("image", "digest"), [
    ("registry.corp/sglang:v0.5.6", "sha256:mirror"),
    ("lmsysorg/sglang:v0.5.6", "sha256:hubindex"),
    ("docker.io/lmsysorg/sglang:v0.5.6", "sha256:hubindex"),
    ("registry.corp/sglang@sha256:mirror", "sha256:mirror"),
    ("llmsweep/sglang-patched:1", None),  # tagged here from that id: no registry digest of its own
])
def test_the_digest_recorded_is_the_images_own_repositorys(tmp_path: Path, image: str, digest: str | None) -> None:
    """An image with digests from two repositories recorded the first listed whatever the recipe named: a run of
    `registry.corp/sglang:v0.5.6` was labelled with Docker Hub's index digest, which its registry does not have."""
    from llmsweep.execute.docker import image_facts

    docker = tmp_path / "docker"
    docker.write_text(INSPECT_MIRRORED)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    assert image_facts(str(docker), image) == ServedIn(image=image, image_id="sha256:0a1b", image_digest=digest)


@pytest.mark.parametrize("how", ["interrupted", "timed out"])
def test_a_pull_interrupted_or_timed_out_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Ctrl-C (or the pull's own timeout) while pulling stops the `docker pull` process group: nothing pulls on."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute import docker as docker_mod

    monkeypatch.setattr(docker_mod, "_PULL_PROGRESS_S", 0.2)
    docker = fake_pull_docker(tmp_path, 5.0)
    started: list[int] = []
    real_popen = docker_mod.subprocess.Popen

    def popen(*args: Any, **kw: Any) -> Any:
        proc = real_popen(*args, **kw)
        if "pull" in list(args[0]):
            started.append(proc.pid)
        return proc

    monkeypatch.setattr(docker_mod.subprocess, "Popen", popen)

    def event(line: str) -> None:
        if how == "interrupted" and line.startswith("still pulling"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt if how == "interrupted" else LaunchError) as err:
        docker_mod.ensure_image(str(docker), "reg.example/x:1", log_path=tmp_path / "pull.log", event=event,
                                timeout_s=60.0 if how == "interrupted" else 0.5)
    if how == "timed out":
        assert "did not finish within" in str(err.value) and "pull_timeout_s" in str(err.value)
    (pid,) = started
    from support.procs import alive

    def left() -> list[int]:  # live members of the pull's process group (it leads its own)
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == pid and alive(int(p))]

    deadline = time.monotonic() + 5.0  # a member the signal reached may still be exiting
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left(), f"processes of the pull's group are left: {left()}"
    assert not (tmp_path / "pulled").exists()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


FAKE_REMOVING = """#!/bin/sh
# `docker rm -f` of a container whose removal is under way (another `docker rm`, an older run's `--rm` container).
case "$1" in
  rm) echo "Error response from daemon: removal of container $3 is already in progress" >&2; exit 1 ;;
  container) n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n + 1)) > "{count}"
             if [ "$n" -lt {polls} ]; then echo removing; else echo "Error: No such container: $6" >&2; exit 1; fi ;;
esac
"""


@pytest.mark.parametrize("polls", [2, 10_000])
def test_a_removal_already_under_way_is_waited_for(tmp_path: Path, polls: int) -> None:
    """Success once the daemon's own removal has ended; a removal that never ends is a failure, not a success."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.docker import remove_container

    docker = tmp_path / "docker"
    docker.write_text(FAKE_REMOVING.format(count=tmp_path / "count", polls=polls))
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    if polls == 2:
        remove_container([str(docker), "rm", "-f", "c1"], timeout_s=20)
        assert int((tmp_path / "count").read_text()) == 3
    else:
        with pytest.raises(LaunchError, match="already in progress"):
            remove_container([str(docker), "rm", "-f", "c1"], timeout_s=1.0)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("setpriv") is None,
                    reason="the parent-death signal is Linux's, set through util-linux's setpriv")
def test_a_pull_ends_when_the_harness_is_killed_with_sigkill(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up, and the pull is in a session of its own: the kernel's parent-death signal ends it."""
    docker = tmp_path / "docker"
    pid_file = tmp_path / "pull.pid"
    docker.write_text(FAKE_PULL.format(pulled=tmp_path / "pulled", step=30).replace(
        "  pull) ", f'  pull) echo $$ > "{pid_file}"; '))
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    code = ("import sys; from pathlib import Path; from llmsweep.execute.docker import ensure_image; "
            f"ensure_image({str(docker)!r}, 'reg.example/x:1', log_path=Path({str(tmp_path / 'pull.log')!r}), "
            "event=print)")
    harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
    pull = 0
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        pull = int(pid_file.read_text())
        from support.procs import alive

        assert alive(pull)
        harness.kill()
        harness.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(pull) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pull), "the pull outlived the killed harness"
    finally:
        harness.kill()
        if pull:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pull, signal.SIGKILL)


@pytest.mark.parametrize(("said", "network"), [
    ("Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io "
     "on 10.0.0.2:53: no such host", True),
    ("Error response from daemon: Get \"https://r.example/v2/\": net/http: TLS handshake timeout", True),
    # what docker 20.10 says after ~25 s when the registry takes the connection and never answers (measured)
    ("Error response from daemon: Get \"http://127.0.0.1:45999/v2/\": context deadline exceeded", True),
    ("Error response from daemon: manifest for r.example/x:1 not found: manifest unknown", False),
    # the daemon itself down (reached over TCP): no registry was asked, so no network fix for it
    ("Cannot connect to the Docker daemon at tcp://10.0.0.5:2375. Is the docker daemon running? (dial tcp "
     "10.0.0.5:2375: connect: connection refused)", False),
    ("Error response from daemon: pull access denied for x, repository does not exist or may require 'docker login'",
     False),
])
def test_a_failed_pull_names_the_network_only_when_the_registry_was_not_reached(said: str, network: bool) -> None:
    from llmsweep.execute.docker import pull_failure_fix

    fix = pull_failure_fix(said)
    assert ("cannot reach the registry" in fix) is network
    daemon = "docker daemon" in said.lower()
    assert ("the Docker daemon did not answer" in fix) is daemon
    assert ("docker login" in fix) is not (network or daemon)


@pytest.mark.parametrize("said", [
    "error during connect: Post \"http://%2Fvar%2Frun%2Fdocker.sock/v1.41/images/create\": dial unix "
    "/var/run/docker.sock: connect: connection refused",
    "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock",
])
def test_a_pull_the_daemon_never_took_names_the_daemon(said: str) -> None:
    from llmsweep.execute.docker import pull_failure_fix

    assert pull_failure_fix(said).startswith("the Docker daemon did not answer")


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker CLI on PATH (`.ci/run` installs docker.io)")
def test_a_server_that_dies_starting_names_the_users_docker_flags_in_its_fix(tmp_path: Path) -> None:
    """The real docker CLI refuses a flag it does not know before it asks the daemon anything: the server 'exits
    while starting', and the fix named the engine arguments, model and image — never the flags the user put in
    front of them (the executor's extra_args), which were the fault."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.preflight import pick_free_port

    spec = SPEC.model_copy(update={"port": pick_free_port()})
    launcher = DockerLauncher(DockerOptions(gpu_vendor="none", extra_args=("--no-such-flag",)))
    handle = launcher.launch(spec, log_path=tmp_path / "server.log", environ=dict(os.environ))
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=20, poll_s=0.1)
    finally:
        handle.stop(grace_s=1)
    assert "no-such-flag" in err.value.message  # the CLI's own words, in the log tail
    assert "the docker executor's extra_args (--no-such-flag)" in (err.value.fix or ""), err.value.fix
    plain = DockerLauncher(DockerOptions(gpu_vendor="none")).launch(
        spec.model_copy(update={"image": "llmsweep-test/none:0", "argv": ("--bad",)}), log_path=tmp_path / "b.log",
        environ={**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"})
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(plain, timeout_s=20, poll_s=0.1)
    finally:
        plain.stop(grace_s=1)
    assert "extra_args" not in (err.value.fix or "")  # no flags of the user's: none named
    # docker refused (exit 125) because its daemon did not answer: the daemon is the fix, not the engine's arguments
    assert (err.value.fix or "").startswith("the Docker daemon did not answer"), err.value.fix


def test_host_folders_given_relative_or_with_a_tilde_are_mounted_by_their_absolute_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hf_cache=~/.cache/huggingface` or `model_dir=models` went to `docker run -v` as written: docker takes a source
    without a leading slash for a named volume's and refuses the relative mount point, so the server never started
    ("invalid mount path"), and pyxis and a batch job on a node would resolve them elsewhere."""
    from llmsweep.execute.pyxis import SrunOptions
    from llmsweep.execute.slurm import SlurmOptions

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    argv = render(hf_cache="~/.cache/huggingface", model_dir="models", harness_dir="./llmsweep")
    mounts = flag_value(argv, "-v")
    cache = tmp_path / "home" / ".cache" / "huggingface"
    assert f"{cache}:{cache}" in mounts and f"{tmp_path / 'models'}:{tmp_path / 'models'}:ro" in mounts, mounts
    assert f"{tmp_path / 'llmsweep'}:/llmsweep:ro" in mounts and f"HF_HUB_CACHE={cache}" in argv
    node = SrunOptions(hf_cache="~/hf", model_dir="models")
    assert (node.hf_cache, node.model_dir) == (tmp_path / "home" / "hf", tmp_path / "models")
    assert SlurmOptions(squash_dir="squash").squash_dir == tmp_path / "squash"


def test_host_paths_of_the_command_under_no_same_path_mount_are_the_ones_named(tmp_path: Path) -> None:
    """What a start-up failure's fix names as unseen by the container: host paths that exist, mounted nowhere at their
    own path (the harness goes to /llmsweep, a mount to another target moves it); paths only the image has are not."""
    from llmsweep.execute.docker import unmounted_host_paths

    for name in ("models/a", "hf", "moved", "harness/cfg", "loose"):
        (tmp_path / name).mkdir(parents=True)
    spec = LaunchSpec(engine="vllm", image="x/y:1", port=1, argv=(
        "vllm", "serve", str(tmp_path / "models/a"), f"--download-dir={tmp_path / 'hf'}", "--cfg",
        str(tmp_path / "harness/cfg"), "--x", str(tmp_path / "moved"), "/workspace/in-image-only"),
        env={"LOOSE": str(tmp_path / "loose")})
    options = DockerOptions(model_dir=tmp_path / "models", hf_cache=tmp_path / "hf", harness_dir=tmp_path / "harness",
                            extra_mounts=(f"{tmp_path / 'moved'}:/elsewhere:ro",))
    assert unmounted_host_paths(spec, options) == [str(tmp_path / "harness/cfg"), str(tmp_path / "moved"),
                                                   str(tmp_path / "loose")]
    mounted = options.model_copy(update={"extra_mounts": (f"{tmp_path}:{tmp_path}:ro",)})
    assert unmounted_host_paths(spec, mounted) == []


def test_the_mount_option_a_fix_gives_is_one_shell_word_the_option_reads(tmp_path: Path) -> None:
    """The unmounted-path fix showed `extra_mounts=["FOLDER:FOLDER:ro"]` bare: pasted, the shell dropped its quotes and
    zsh refused the brackets as a glob that matches nothing. It is one quoted word, as every option a fix shows."""
    import re
    import subprocess

    from llmsweep.cli.options import executor_options
    from llmsweep.execute.docker import docker_exit_fix

    fix = docker_exit_fix(1, "", unmounted=["/data/m"]) or ""
    option = re.search(r"--executor-option ('[^']*')", fix)
    assert option is not None, fix
    done = subprocess.run(["bash", "-O", "failglob", "-c", f"printf '%s\\n' {option.group(1)}"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert DockerOptions(**executor_options((done.stdout.strip(),))).extra_mounts == ("FOLDER:FOLDER:ro",)


@pytest.mark.parametrize(("status", "said"), [
    (139, "the engine crashed (SIGSEGV, signal 11"), (134, "the engine crashed (SIGABRT, signal 6"),
    (143, "the engine was ended by a signal this run did not send (SIGTERM, signal 15"),
    (137, None), (1, None), (0, None), (255, None), (-11, None), (None, None)])
def test_a_containers_exit_status_names_the_signal_that_ended_its_engine(status: int | None, said: str | None) -> None:
    """docker exits 128 + N when signal N ended the container's main process: a crash (SIGSEGV, SIGABRT) is named as
    one; 137 is left to the daemon's word (an OOM kill, a `docker kill`); an exit status of the engine's own is no
    signal."""
    from llmsweep.execute.docker import ended_by_signal

    named = ended_by_signal(status)
    assert (named is None) if said is None else (named or "").startswith(said), named


def test_an_image_in_pyxis_spelling_is_refused_with_dockers_before_any_pull(tmp_path: Path) -> None:
    """A recipe written for pyxis (`nvcr.io#nvidia/x:1`) run under docker: `docker pull` said "invalid reference
    format", and its fix sent the user to the tag and `docker login`. It is refused before anything runs, with the
    spelling docker reads (which pyxis reads too)."""
    spec = SPEC.model_copy(update={"image": "nvcr.io#nvidia/sglang:v0.5.6"})
    launcher = DockerLauncher(DockerOptions(docker=str(tmp_path / "no-docker-here")))  # nothing may be run
    for attempt in (lambda: launcher.prepare(spec, log_dir=tmp_path, event=lambda _: None),
                    lambda: render_docker_run(spec, DockerOptions(), "n", {})):
        with pytest.raises(ConfigError) as err:
            attempt()
        assert "pyxis's spelling" in err.value.message and "nvcr.io/nvidia/sglang:v0.5.6" in (err.value.fix or "")


def test_each_folder_the_options_mount_says_where_the_container_sees_it(tmp_path: Path) -> None:
    """`-v /host/patches:/opt/patches` puts this host's patches at /opt/patches in the container: the reuse key reads a
    search-path folder there through that source (`DockerExecutor.image_mounts`, `execute.base.host_path_of`); a
    named volume's mount, a spec with no target and flags name no host folder; `hf_cache` and `model_dir` are seen at
    their own path, the harness at /llmsweep."""
    from llmsweep.execute.base import ImageMount, host_path_of

    for name in ("models", "harness", "patches", "lib", "anon"):
        (tmp_path / name).mkdir()
    specs = [f"{tmp_path / 'patches'}:/opt/patches:ro", "cache:/root/.cache",
             f"{tmp_path / 'lib'}/:/usr/local/lib/extra/", str(tmp_path / "anon")]
    docker = get_executor("docker", {"model_dir": str(tmp_path / "models"), "harness_dir": str(tmp_path / "harness"),
                                     "extra_mounts": specs})
    mounts = docker.image_mounts()
    assert mounts == (ImageMount.same_path(tmp_path / "models"), ImageMount(tmp_path / "harness", Path("/llmsweep")),
                      ImageMount(tmp_path / "patches", Path("/opt/patches")),
                      ImageMount(tmp_path / "lib", Path("/usr/local/lib/extra")))
    assert host_path_of("/opt/patches", mounts) == tmp_path / "patches"
    assert host_path_of("/usr/local/lib/extra/libx.so", mounts) == tmp_path / "lib" / "libx.so"
    assert host_path_of(str(tmp_path / "models" / "m"), mounts) == tmp_path / "models" / "m"
    assert host_path_of("/root/.cache/x", mounts) is None
    assert host_path_of(str(tmp_path / "anon"), mounts) is None  # `-v PATH`: an anonymous volume there
