"""The docker executor against a real Docker daemon, serving a real engine (`transformers serve` on the CPU).

`.ci/run` installs Debian's `docker.io` and starts its daemon (`scripts/ci/start_docker.sh`: vfs storage, host
network only); without a daemon that answers, or without a python that serves with transformers
(LLMSWEEP_TRANSFORMERS_PYTHON), these tests skip. Nothing is pulled: the image is imported here from an empty root
file system, and the engine's files (the host's system folders, the transformers python, the model) reach the
container as read-only bind mounts (`extra_mounts`), so what runs is the host's engine inside a container the daemon
made — started, signalled, stopped and removed by the daemon, as in production.

What a user relies on: `llmsweep run --executor docker` serves, measures and stores a valid result; `docker stop`
ends the engine within seconds (with `--init`; the negative control shows the engine as PID 1 outliving the whole
grace); a harness killed with SIGKILL leaves its container running, and `--resume` removes it and finishes the run;
no container of the run is left afterwards."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import wait_for
from support.real_engine import serving_python, tiny_transformers_recipe
from test_run_support import cli_env, kill_quietly, run_argv, run_here, start_cli

from llmsweep import engines
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.docker import DockerLauncher, DockerOptions
from llmsweep.execute.handle import ProcessServerHandle
from llmsweep.execute.preflight import resolve_port
from llmsweep.execute.ready import wait_ready
from llmsweep.plan import full_sweep
from llmsweep.spec import loads_recipes

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

SESSION = uuid.uuid4().hex[:8]
"""This test process's own: the daemon is the host's, and another pytest session (a second checkout's suite, a
helper's run of one file) may run these tests on it at the same time. Each check that nothing is left behind removes
the containers of its own names, and an image tag is moved or removed by its own session only: with names shared by
every session, one session's clean-up removed the containers another was measuring (its job failed, "something
outside this run stopped the container") and called them its own left-overs."""
IMAGE = f"llmsweep-test/hostbind-{SESSION}:1"
PREFIX = f"llmsweep-test-{SESSION}"
"""Container names of these tests start with this (the executor's `name_prefix`)."""


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _daemon_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", "--format", "{{.ServerVersion}}", timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def tf_python() -> Path:
    if not _daemon_answers():
        pytest.skip("no Docker daemon answers (`.ci/run` starts one: scripts/ci/start_docker.sh)")
    exe = serving_python()
    if exe is None:
        pytest.skip("no python3 on PATH (or LLMSWEEP_TRANSFORMERS_PYTHON) has torch + transformers[serving]")
    return exe


@pytest.fixture(scope="module")
def image(tf_python: Path) -> Iterator[str]:
    """An image of empty folders (imported, never pulled): the mounts below fill it; removed after the module."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("etc", "tmp", "proc", "sys", "dev", "usr", "lib", "lib64", "bin", "root", "work"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
    proc = subprocess.run(["docker", "import", "-", IMAGE], input=buf.getvalue(), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    yield IMAGE
    _docker("rmi", IMAGE)


@pytest.fixture
def model_dir(tiny_model_dir: Path) -> Path:
    return tiny_model_dir


def _mounts(tf_python: Path, model_dir: Path) -> list[str]:
    """The host's engine, read-only: system folders, the transformers python's own and base installs, the model."""
    venv = tf_python.parent.parent
    base = subprocess.run([str(tf_python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()
    paths = ["/usr", "/lib", "/lib64", "/bin", "/etc", base, str(venv), str(model_dir)]
    return [f"{p}:{p}:ro" for p in dict.fromkeys(paths) if os.path.isdir(p)]


def _options(tf_python: Path, model_dir: Path, **extra: object) -> dict[str, object]:
    return {"gpu_vendor": "none", "name_prefix": PREFIX, "extra_mounts": _mounts(tf_python, model_dir),
            "extra_args": ["-e", f"PATH={tf_python.parent}:/usr/local/bin:/usr/bin:/bin"], **extra}


def _recipe(tf_python: Path, model_dir: Path, tmp_path: Path, **kw: object) -> Path:
    text = tiny_transformers_recipe(model_dir, **kw)  # type: ignore[arg-type]
    text = text.replace("huggingface/transformers-pytorch-cpu:5.17.0", IMAGE)
    path = tmp_path / "tf-docker.yaml"
    path.write_text(text)
    return path


def _executor_flags(options: dict[str, object]) -> list[str]:
    return [a for k, v in options.items() for a in ("--executor-option", f"{k}={json.dumps(v)}")]


def _containers(prefix: str = PREFIX) -> list[str]:
    """Containers of these tests (named `prefix`-…), running or not."""
    out = _docker("ps", "-a", "--filter", f"name=^{prefix}-", "--format", "{{.Names}} {{.Status}}").stdout
    return [line for line in out.splitlines() if line.strip()]


def remove_left_behind(prefix: str = PREFIX) -> None:
    """After a test: every container of `prefix` removed, and the test failed if there was any (a test file's own
    prefix: files that run side by side under pytest-xdist never remove each other's)."""
    left = _containers(prefix)
    for line in left:
        _docker("rm", "-f", line.split()[0])
    assert not left, f"containers left behind: {left}"


def _complete(base_url: str, model: str) -> None:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
    req = urllib.request.Request(f"{base_url}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.status == 200


@pytest.fixture
def no_containers_after() -> Iterator[None]:
    yield
    remove_left_behind()


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_docker_stop_ends_the_engine_within_seconds_only_with_init(tf_python: Path, model_dir: Path, image: str,
                                                                   tmp_path: Path) -> None:
    """`docker stop` sends SIGTERM to the container's PID 1. Once it has served a request, transformers serve shuts
    its HTTP server down on it and then re-raises it at its default action to end the threads left: as PID 1 the
    kernel ignores that, so without `--init` the engine lives until the grace runs out and the daemon kills it; with
    `--init` it is gone in seconds.

    Both cases in one test: the engine as PID 1 (the negative control) waits out its grace while the engine with
    `--init` is started, served and stopped beside it."""
    job = full_sweep(loads_recipes(_recipe(tf_python, model_dir, tmp_path, concs="[1]").read_text(), "tf.yaml")
                     .raise_on_error().recipes)[0]
    grace = {True: 20.0, False: 6.0}
    took: dict[bool, float] = {}
    handles: dict[bool, ProcessServerHandle] = {}

    def stop(init: bool) -> None:
        t0 = time.monotonic()
        handles[init].stop(grace_s=grace[init])
        took[init] = time.monotonic() - t0

    def serve(init: bool) -> None:
        spec = resolve_port(engines.render(job, port=0))
        launcher = DockerLauncher(DockerOptions.model_validate(_options(tf_python, model_dir, init=init)))
        handles[init] = handle = launcher.launch(spec, log_path=tmp_path / f"server-{init}.log")
        wait_ready(handle, timeout_s=180, poll_s=0.25)
        name = handle.cleanup[-1]  # `docker rm -f NAME`: this container (the other case's may be up beside it)
        assert name.startswith(f"{PREFIX}-")
        assert any(line.split()[0] == name and " Up " in f" {line} " for line in _containers())
        _complete(spec.base_url, str(model_dir))  # serving starts the engine's batching thread, which outlives uvicorn

    pid1_stop: threading.Thread | None = None
    try:
        try:
            serve(False)
        finally:
            if False in handles:
                pid1_stop = threading.Thread(target=stop, args=(False,), name="stop-engine-as-pid-1")
                pid1_stop.start()
        try:
            serve(True)
        finally:
            if True in handles:
                stop(True)
    finally:
        if pid1_stop is not None:
            pid1_stop.join(timeout=120)
    assert all(handle.gone() for handle in handles.values()) and not _containers()
    for init in (True, False):
        # it did shut down on the SIGTERM, either way
        assert "Finished server process" in (tmp_path / f"server-{init}.log").read_text()
    assert took[True] < grace[True] / 2, f"stop took {took[True]:.1f} s of a {grace[True]} s grace"
    # the negative control: the engine as PID 1 outlives its own shutdown until the daemon kills it
    assert took[False] >= grace[False], f"stop took {took[False]:.1f} s"


@pytest.mark.timeout(420)
@pytest.mark.usefixtures("no_containers_after")
def test_run_serves_in_the_container_and_resume_removes_what_a_killed_harness_left(
    tf_python: Path, model_dir: Path, image: str, tmp_path: Path
) -> None:
    """A run SIGKILLed mid-measurement leaves its container running (it outlives the docker CLI); `--resume` removes
    it, serves the rest in a new container and stores valid results; nothing is left."""
    # Four requests of ~0.5 s per job: the kill lands seconds before the first job could end (records.jsonl has its
    # warm-up record first), and the resumed run measures two jobs in seconds.
    recipe = _recipe(tf_python, model_dir, tmp_path, concs="[1, 2]", prompts_per_conc=4, osl=24)
    out, log = tmp_path / "run", tmp_path / "run.log"
    args: list[str | Path] = [recipe, "--executor", "docker", *_executor_flags(_options(tf_python, model_dir)),
                              "--out", out, "--no-report"]
    env = cli_env(tmp_path)
    proc = start_cli(args, env, log)
    try:
        def measuring() -> bool:
            jobs = out / "jobs"
            return jobs.is_dir() and any((p / "records.jsonl").is_file() and (p / "records.jsonl").stat().st_size
                                         for p in jobs.iterdir())

        wait_for(measuring, timeout=180, what="the first records", proc=proc, log=log)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        kill_quietly(proc.pid)
    left = _containers()
    assert len(left) == 1 and " Up " in f" {left[0]} ", left  # the container outlived the killed harness
    name = left[0].split()[0]

    resumed = subprocess.run(run_argv(*args, "--resume"), env=env, capture_output=True, text=True, timeout=300)
    said = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, said[-4000:]
    assert f"docker rm -f {name}" in said  # the pid file's clean-up ran
    assert not _containers()
    summaries = [json.loads(p.read_text()) for p in sorted(out.glob("jobs/*/summary.json"))]
    assert len(summaries) == 2 and all(s["validity"]["verdict"] == "valid" for s in summaries), said[-3000:]
    image_id = json.loads(_docker("image", "inspect", IMAGE).stdout)[0]["Id"]
    for s in summaries:  # what ran, as the daemon says: an imported image has an id and no registry digest
        launch = s["provenance"]["launch"]
        assert (launch["image"], launch["image_id"], launch["image_digest"]) == (IMAGE, image_id, None)
    for job_dir in sorted((out / "jobs").iterdir()):
        assert "docker run --init" in (job_dir / "server_command.txt").read_text()


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_sigint_mid_measurement_stops_the_container_and_exits_130(tf_python: Path, model_dir: Path, image: str,
                                                                 tmp_path: Path) -> None:
    """Ctrl-C while the engine serves: the run stops its container through the daemon, keeps no pid file (nothing
    is left for `--resume` to stop) and exits 130."""
    # 16 requests of ~0.5 s: the first record (the warm-up's) comes soon, and the signal still lands mid-measurement
    recipe = _recipe(tf_python, model_dir, tmp_path, concs="[1]", prompts_per_conc=16, osl=24)
    out, log = tmp_path / "run", tmp_path / "run.log"
    proc = start_cli([recipe, "--executor", "docker", *_executor_flags(_options(tf_python, model_dir)), "--out", out,
                      "--no-report"], cli_env(tmp_path), log)
    try:
        wait_for(lambda: any(p.stat().st_size for p in out.glob("jobs/*/records.jsonl")), timeout=180,
                 what="the first records", proc=proc, log=log)
        assert len(_containers()) == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 130, log.read_text()[-3000:]
    finally:
        kill_quietly(proc.pid)
    assert not _containers()
    assert not list(out.glob("servers/*/server*.pid")), "a pid file says something was left"


def _installed_transformers(tf_python: Path) -> str:
    return subprocess.run([str(tf_python), "-c", "import importlib.metadata as m; print(m.version('transformers'))"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.strip()


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_a_result_is_labelled_with_the_engine_version_its_container_has_not_the_declared_one(
    tf_python: Path, model_dir: Path, image: str, tmp_path: Path
) -> None:
    """transformers serve reports no version, and an image built here names none in its tag: the result was labelled
    with the recipe's declared version, though the container ran another (both read-back fields null, no warning).
    The version is now read in the container (`docker exec` of its interpreter), the drift warned and the result
    labelled with what ran, as the local executor does for the host's engine."""
    installed = _installed_transformers(tf_python)
    text = _recipe(tf_python, model_dir, tmp_path, concs="[1]", prompts_per_conc=2, osl=8, warmups=0).read_text()
    assert "version: 5.17.0 }" in text
    (tmp_path / "declared.yaml").write_text(text.replace("version: 5.17.0 }", "version: 4.50.0 }"))
    out = tmp_path / "run"
    proc = run_here([tmp_path / "declared.yaml", "--executor", "docker",
                     *_executor_flags(_options(tf_python, model_dir)), "--out", out, "--no-report"],
                    cli_env(tmp_path))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert (f"warning: engine version: the recipe declares transformers 4.50.0, but the server ran transformers "
            f"{installed}") in said, said[-3000:]
    (summary_file,) = out.glob("jobs/*/summary.json")
    launch = json.loads(summary_file.read_text())["provenance"]["launch"]
    assert launch["engine_version_reported"] is None  # transformers serve has no /version
    assert (launch["engine_version"], launch["engine_version_declared"], launch["engine_version_installed"]) == (
        installed, "4.50.0", installed), launch


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("no_containers_after")
def test_the_engine_version_is_read_from_the_interpreter_a_console_script_names_in_the_container(
    tf_python: Path, model_dir: Path, image: str, tmp_path: Path
) -> None:
    """A launch by console script (`transformers serve`, `vllm serve`) is read with the python its `#!` line names in
    the container; `python3 -m` with that python; an engine the container's python lacks reads as None (unread, never
    the declared version)."""
    from llmsweep.execute.docker import container_engine_version

    spec = resolve_port(LaunchSpec(engine="transformers", image=image, argv=("/bin/sleep", "120"), port=0, gpus=0))
    launcher = DockerLauncher(DockerOptions.model_validate(_options(tf_python, model_dir)))
    handle = launcher.launch(spec, log_path=tmp_path / "server.log")
    try:
        name = handle.cleanup[-1]
        wait_for(lambda: any(line.split()[0] == name and " Up " in f" {line} " for line in _containers()),
                 timeout=60, what="the container")
        installed = _installed_transformers(tf_python)
        for argv in (("transformers", "serve", "m"), ("python3", "-m", "transformers.cli.transformers", "serve")):
            launched = LaunchSpec(engine="transformers", image=image, argv=argv, port=1, gpus=0)
            assert container_engine_version("docker", name, launched) == installed, argv
        for engine, argv in (("vllm", ("python3", "-m", "vllm.entrypoints.openai.api_server")),
                             ("vllm", ("vllm", "serve", "m"))):
            assert container_engine_version("docker", name, LaunchSpec(engine=engine, image=image, argv=argv,
                                                                       port=1, gpus=0)) is None
    finally:
        handle.stop(grace_s=1)


@pytest.fixture
def registry(image: str, tmp_path: Path) -> Iterator[str]:
    """A registry on loopback (Debian's `docker-registry`; the daemon trusts 127.0.0.0/8 without TLS) holding the
    test image, which the daemon then no longer has under that name."""
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("no docker-registry here (`.ci/run` installs Debian's)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for(up, timeout=30, what="the registry")
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _push(image: str, ref: str) -> str:
    """Push `image` as `ref`, drop `ref` locally; the digest the registry gave it."""
    assert _docker("tag", image, ref).returncode == 0
    pushed = _docker("push", ref, timeout=120)
    assert pushed.returncode == 0, pushed.stderr
    digest = pushed.stdout.split("digest: ", 1)[1].split()[0]
    assert _docker("rmi", ref).returncode == 0
    assert _docker("image", "inspect", ref).returncode != 0
    return digest


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_an_image_the_host_lacks_is_pulled_before_the_server_starts_and_its_digest_recorded(
    tf_python: Path, model_dir: Path, image: str, registry: str, tmp_path: Path
) -> None:
    """The pull is its own step, said on the console and logged, outside the start-up timeout; provenance records the
    digest the daemon reports for what ran. An image the registry does not have fails the job with the pull's error."""
    ref = f"{registry}/llmsweep-test/hostbind:pulled"
    digest = _push(image, ref)
    flags = _executor_flags(_options(tf_python, model_dir))
    recipe = _recipe(tf_python, model_dir, tmp_path, concs="[1]").read_text().replace(IMAGE, ref)
    (tmp_path / "pulled.yaml").write_text(recipe)
    out = tmp_path / "run"
    proc = subprocess.run(run_argv(tmp_path / "pulled.yaml", "--executor", "docker", *flags, "--out", out,
                                   "--no-report"), env=cli_env(tmp_path), capture_output=True, text=True, timeout=240)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert f"pulling {ref} (not on this host" in said and f"pulled {ref} in " in said
    assert said.index("pulled ") < said.index("launching transformers server")
    (pull_log,) = out.glob("servers/*/image-pull.log")
    assert digest in pull_log.read_text()
    (summary_file,) = out.glob("jobs/*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["validity"]["verdict"] == "valid"
    launch = summary["provenance"]["launch"]
    assert launch["image"] == ref and launch["image_digest"] == digest
    assert launch["image_id"] == json.loads(_docker("image", "inspect", ref).stdout)[0]["Id"]
    _docker("rmi", ref)

    missing = f"{registry}/llmsweep-test/absent:1"
    (tmp_path / "absent.yaml").write_text(recipe.replace(ref, missing))
    out2 = tmp_path / "run-absent"
    t0 = time.monotonic()
    proc = subprocess.run(run_argv(tmp_path / "absent.yaml", "--executor", "docker", *flags, "--out", out2,
                                   "--no-report"), env=cli_env(tmp_path), capture_output=True, text=True, timeout=240)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and time.monotonic() - t0 < 120, said[-3000:]
    (outcome_file,) = out2.glob("jobs/*/outcome.json")
    outcome = json.loads(outcome_file.read_text())
    assert outcome["status"] == "failed", outcome
    assert any(f"docker pull {missing}` failed" in r and ("not found" in r or "manifest unknown" in r)
               and "docker login" in r for r in outcome["reasons"]), outcome
    assert "launching transformers server" not in said


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_a_host_folder_to_mount_that_does_not_exist_is_refused_before_anything_runs(
    tf_python: Path, model_dir: Path, image: str, tmp_path: Path
) -> None:
    """`docker run -v /typo:/typo` does not fail: the daemon creates /typo (empty, owned by root) and the engine finds
    no model there, or downloads into a new root-owned cache. A model_dir, hf_cache or extra mount this host lacks is
    bad input: the run refuses it at once (exit 2) with the option, the path and the fix, and creates nothing."""
    recipe = _recipe(tf_python, model_dir, tmp_path, concs="[1]")
    missing, cache = tmp_path / "no-such-models", tmp_path / "no-such-hf-cache"
    options = {**_options(tf_python, model_dir), "model_dir": str(missing)}
    options["extra_mounts"] = [*options["extra_mounts"], f"{cache}:{cache}"]  # type: ignore[misc]
    proc = run_here([recipe, "--executor", "docker", *_executor_flags(options), "--out", tmp_path / "run",
                     "--no-report"], cli_env(tmp_path))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said[-3000:]
    assert f"model_dir {missing}" in said and f"extra_mounts {cache}" in said and "mkdir -p" in said, said[-3000:]
    assert not missing.exists() and not cache.exists()  # the daemon made neither
    assert not (tmp_path / "run" / "jobs").exists()


@pytest.mark.timeout(120)
@pytest.mark.usefixtures("no_containers_after")
def test_gpus_on_a_daemon_without_the_nvidia_runtime_fail_with_the_toolkit_fix(image: str, tmp_path: Path) -> None:
    """A GPU job on a host whose Docker has no NVIDIA Container Toolkit: `docker run --gpus` is refused by the daemon
    (exit 125) before any engine runs. The start-up failure said "fix the engine arguments, model path or image" —
    the recipe, which is fine; it now says to install the toolkit (or gpu_vendor=none), beside docker's own words."""
    runtimes = _docker("info", "--format", "{{json .Runtimes}}").stdout
    if "nvidia" in runtimes:
        pytest.skip("this daemon has the NVIDIA runtime: it would give the container its GPUs")
    spec = resolve_port(LaunchSpec(engine="vllm", image=image, argv=("/bin/sleep", "60"), port=0, gpus=1))
    handle = DockerLauncher(DockerOptions(gpu_vendor="nvidia", name_prefix=PREFIX)).launch(
        spec, log_path=tmp_path / "server.log")
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=60, poll_s=0.1)
    finally:
        handle.stop(grace_s=1)
    assert "exited with status 125" in err.value.message and "could not select device driver" in err.value.message
    fix = err.value.fix or ""
    assert "NVIDIA Container Toolkit" in fix and "gpu_vendor=none" in fix, fix
    assert "engine arguments" not in fix


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """A registry address on loopback that accepts connections and never answers: the daemon's pull waits on it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, name="silent-registry", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in [*held, server]:
            conn.close()


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("no_containers_after")
def test_an_image_whose_pull_failed_is_not_pulled_again_for_the_next_server(
    tf_python: Path, model_dir: Path, silent_registry: str, tmp_path: Path
) -> None:
    """Two servers of one image a registry never answers for: the first waits out `pull_timeout_s` and fails with
    the timeout's fix; the second fails at once with the same error instead of waiting out another pull (with the
    default hour, a sweep of eight servers hung eight hours on an image it could never get)."""
    ref = f"{silent_registry}/llmsweep-test/unanswered:1"
    texts = [tiny_transformers_recipe(model_dir, key=key, concs="[1]", extra_args=f"\n      --cb-num-blocks: {n}")
             for key, n in (("tfa", 32), ("tfb", 48))]
    text = "".join(t.replace("      --cb-num-blocks: 64\n", "") for t in texts)
    recipe = tmp_path / "two.yaml"
    recipe.write_text(text.replace("huggingface/transformers-pytorch-cpu:5.17.0", ref))
    options = _options(tf_python, model_dir, pull_timeout_s=3)
    t0 = time.monotonic()
    proc = run_here([recipe, "--executor", "docker", *_executor_flags(options), "--out", tmp_path / "run",
                     "--no-report"], cli_env(tmp_path))
    took = time.monotonic() - t0
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said[-3000:]
    assert said.count(f"pulling {ref} (not on this host") == 1, said[-3000:]  # pulled for the first server only
    outcomes = [json.loads(p.read_text()) for p in sorted((tmp_path / "run").glob("jobs/*/outcome.json"))]
    assert len(outcomes) == 2 and all(o["status"] == "failed" for o in outcomes), outcomes
    for outcome in outcomes:
        assert any(f"`docker pull {ref}` did not finish within 3 s" in r for r in outcome["reasons"]), outcome
    assert any("not pulled again" in r for o in outcomes for r in o["reasons"]), outcomes
    assert took < 3 * 2 + 20, f"{took:.0f} s"


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("no_containers_after")
def test_a_model_path_the_container_does_not_see_is_named_in_the_fix(tf_python: Path, model_dir: Path, image: str,
                                                                     tmp_path: Path) -> None:
    """The recipe's model path exists on the host, but no mount brings it into the container: the engine exits
    while starting with its own words about that path ("Repo id must be in the form ..."), and the fix said to fix
    the model path, which is right on the host. It now names the path the container does not see and how to mount
    it (model_dir, or a same-path extra mount)."""
    recipe = _recipe(tf_python, model_dir, tmp_path, concs="[1]")
    options = _options(tf_python, model_dir)
    options["extra_mounts"] = [m for m in options["extra_mounts"] if str(model_dir) not in m]  # type: ignore[attr-defined]
    proc = run_here([recipe, "--executor", "docker", *_executor_flags(options), "--out", tmp_path / "run",
                     "--no-report"], cli_env(tmp_path))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said[-3000:]
    (outcome_file,) = (tmp_path / "run").glob("jobs/*/outcome.json")
    outcome = json.loads(outcome_file.read_text())
    assert outcome["status"] == "failed", outcome
    (reason,) = [r for r in outcome["reasons"] if "exited with status 1 while starting" in r]
    fix = reason.rpartition("fix: ")[2]
    assert f"the container does not see {model_dir}" in fix and "model_dir=FOLDER" in fix, reason[-1500:]


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("no_containers_after")
def test_reuse_stands_on_a_pinned_images_result_but_runs_a_moving_tags_job_again(
    tf_python: Path, model_dir: Path, image: str, tmp_path: Path
) -> None:
    """`:latest` (or `:nightly`, `:dev`) can name another build tomorrow, and the reuse key holds the tag, not the
    build: a stored result of it was reused for whatever the tag had become. Such a job runs again under `--reuse`,
    said with the fix (pin it); a job of a pinned tag is still reused."""
    moving = f"llmsweep-test/hostbind-{SESSION}:latest"
    assert _docker("tag", image, moving).returncode == 0
    try:
        one = _recipe(tf_python, model_dir, tmp_path, key="pinned", concs="[1]", prompts_per_conc=2, osl=8,
                      warmups=0).read_text()
        text = one + one.replace("pinned:", "moving:", 1).replace(IMAGE, moving)
        (tmp_path / "two.yaml").write_text(text)
        args: list[str | Path] = [tmp_path / "two.yaml", "--executor", "docker",
                                  *_executor_flags(_options(tf_python, model_dir)), "--no-report"]
        env = cli_env(tmp_path)
        first = subprocess.run(run_argv(*args, "--out", tmp_path / "first"), env=env, capture_output=True, text=True,
                               timeout=240)
        assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
        again = subprocess.run(run_argv(*args, "--out", tmp_path / "again", "--reuse"), env=env, capture_output=True,
                               text=True, timeout=240)
        said = again.stdout + again.stderr
        assert again.returncode == 0, said[-3000:]
        seen = {}  # each job's image: reused (a reused.json naming the first run's result), or its own verdict
        for job in (tmp_path / "again" / "jobs").iterdir():
            reused = job / "reused.json"
            seen[json.loads((tmp_path / "first" / "jobs" / job.name / "job.json").read_text())["image"]] = (
                "reused" if reused.is_file() else json.loads((job / "summary.json").read_text())["validity"]["verdict"])
        assert seen == {IMAGE: "reused", moving: "valid"}, (seen, said[-3000:])
        assert f"not reused: 1 job serves {moving}, whose tag names neither a version nor a build date" in said
    finally:
        _docker("rmi", moving)
