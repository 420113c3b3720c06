"""Pyxis/enroot: image spellings map to one squash file; the import is locked, validated and reused; srun flags."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.pyxis import (
    NODE_LAUNCHER_ENV,
    NodeLaunch,
    SrunLauncher,
    SrunOptions,
    enroot_uri,
    import_image_script,
    node_launcher_from_env,
    render_srun,
    squash_path,
    write_node_launch,
)

TOKEN = "hf_PYXISsecretVALUE"


@pytest.mark.parametrize(
    ("image", "uri"),
    [
        ("nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3", "docker://nvcr.io#nvidia/tritonserver:25.01-trtllm-python-py3"),
        ("nvcr.io#nvidia/tritonserver:25.01-trtllm-python-py3", "docker://nvcr.io#nvidia/tritonserver:25.01-trtllm-python-py3"),
        ("lmsysorg/sglang:v0.5.6", "docker://lmsysorg/sglang:v0.5.6"),
        ("localhost:5000/eng:1", "docker://localhost:5000#eng:1"),
        ("docker://rocm/vllm@sha256:abc", "docker://rocm/vllm@sha256:abc"),
    ],
)
def test_enroot_uri_uses_the_registry_hash_form(image: str, uri: str) -> None:
    assert enroot_uri(image) == uri


def test_both_spellings_share_one_squash_file() -> None:
    a = squash_path("nvcr.io/nvidia/vllm:25.01", Path("/cache"))
    b = squash_path("nvcr.io#nvidia/vllm:25.01", Path("/cache"))
    assert a == b and a.parent == Path("/cache") and a.name.startswith("nvcr.io+nvidia+vllm+25.01-")


def test_two_images_never_share_a_squash_file() -> None:
    """A registry's port and a repository path differ only in `:` and `/`, which the file name spells alike: one
    file for both ran the image imported first under the other's label."""
    port, path = squash_path("reg.io:5000/a:b", Path("/c")), squash_path("reg.io/5000/a:b", Path("/c"))
    assert port != path and port.name.startswith("reg.io+5000+a+b-") and path.name.startswith("reg.io+5000+a+b-")


SPEC = LaunchSpec(engine="vllm", image="nvcr.io/nvidia/vllm:25.01",
                  argv=("vllm", "serve", "/models/m", "--port", "8000"), port=8000, gpus=4,
                  secret_env=("HF_TOKEN",), env={"VLLM_LOGGING_LEVEL": "INFO"})


def test_srun_render_for_an_image_has_pyxis_flags_and_mounts() -> None:
    launch = NodeLaunch(
        srun=SrunOptions(harness_dir=Path("/src/llmsweep"), hf_cache=Path("/hf"), model_dir=Path("/models")),
        sqsh=Path("/sq/img.sqsh"), out_dir=Path("/runs/r1"),
    )
    argv = render_srun(SPEC, launch, "step-x")
    cmd = argv[: argv.index("vllm")]
    assert cmd[0] == "srun" and "--overlap" in cmd and "--export=ALL" in cmd and "--job-name=step-x" in cmd
    assert "--gres=gpu:4" in cmd
    assert "--container-image=/sq/img.sqsh" in cmd
    assert "--container-mounts=/src/llmsweep:/llmsweep,/hf:/hf,/models:/models,/runs/r1:/runs/r1" in cmd
    assert "--container-workdir=/llmsweep" in cmd and "--no-container-entrypoint" in cmd
    assert argv[len(cmd):] == list(SPEC.argv)
    assert not any("/workspace" in a for a in argv)
    assert not any("HF_TOKEN" in a or "VLLM_LOGGING_LEVEL" in a for a in argv)  # env travels by --export=ALL


def test_each_mount_a_step_passes_says_where_its_container_sees_the_host_folder() -> None:
    """The reuse key reads a search-path folder of a pyxis step through the mount whose target holds it
    (`option_mounts`, `execute.base.host_path_of`): `PYTHONPATH: /opt/patches` with `/host/patches:/opt/patches` is
    what /host/patches holds, not this host's /opt/patches; the mounts so read are those `--container-mounts` passes."""
    from llmsweep.execute.base import ImageMount, host_path_of
    from llmsweep.execute.pyxis import option_mounts

    opts = SrunOptions(harness_dir=Path("/src/llmsweep"), hf_cache=Path("/hf"), container_mount_home=True,
                       extra_mounts=("/host/patches:/opt/patches:ro", "/host/fixes:/opt/patches/fixes",
                                     "/host/new:/opt/patches", "/host/here:./here"))
    mounts = option_mounts(opts)
    assert ImageMount(Path("/host/patches"), Path("/opt/patches")) in mounts
    assert ImageMount(Path("/src/llmsweep"), Path("/llmsweep")) in mounts
    assert ImageMount.same_path(Path.home()) in mounts
    assert not any(m.source == Path("/host/here") for m in mounts)  # `.`: the container's working directory
    passed = next(a for a in render_srun(SPEC, NodeLaunch(srun=opts, sqsh=Path("/s.sqsh")), "s")
                  if a.startswith("--container-mounts="))
    assert all(f"{m.source}:{m.target}" in passed for m in mounts if m.source != Path.home())
    assert host_path_of("/opt/patches/vllm/sched.py", mounts) == Path("/host/new/vllm/sched.py")  # the later one
    assert host_path_of("/opt/patches/fixes/../fixes/f.py", mounts) == Path("/host/fixes/f.py")  # the deeper one
    assert host_path_of("/llmsweep/src", mounts) == Path("/src/llmsweep/src")
    assert host_path_of("/hf/hub", mounts) == Path("/hf/hub")
    assert host_path_of("/opt/patched", mounts) is None  # the image's own: no mount holds it
    assert host_path_of("/usr/local/cuda/lib64", mounts) is None


def test_srun_render_without_image_is_plain_srun() -> None:
    spec = SPEC.model_copy(update={"image": None, "gpus": 0})
    argv = render_srun(spec, NodeLaunch(), "s")
    assert not any(a.startswith("--container") or a.startswith("--gres") for a in argv)
    assert argv[-len(spec.argv):] == list(spec.argv)


def test_srun_render_refuses_image_without_squash_file_and_bad_mounts() -> None:
    with pytest.raises(ConfigError, match="squash_dir"):
        render_srun(SPEC, NodeLaunch(), "s")
    bad = NodeLaunch(srun=SrunOptions(extra_mounts=("/a,b:/c",)), sqsh=Path("/x.sqsh"))
    with pytest.raises(ConfigError, match="comma"):
        render_srun(SPEC, bad, "s")


def test_node_launcher_comes_from_the_file_the_batch_job_names(tmp_path: Path) -> None:
    assert isinstance(node_launcher_from_env({}), LocalLauncher)
    path = write_node_launch(NodeLaunch(sqsh=Path("/sq/a.sqsh"), out_dir=tmp_path), tmp_path / "node_launch.json")
    launcher = node_launcher_from_env({NODE_LAUNCHER_ENV: str(path)})
    assert isinstance(launcher, SrunLauncher) and launcher.launch_options.sqsh == Path("/sq/a.sqsh")
    write_node_launch(NodeLaunch(srun=SrunOptions(use_srun=False)), path)
    assert isinstance(node_launcher_from_env({NODE_LAUNCHER_ENV: str(path)}), LocalLauncher)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="node launch file"):
        node_launcher_from_env({NODE_LAUNCHER_ENV: str(path)})


def test_srun_launcher_refuses_to_run_outside_an_allocation(tmp_path: Path) -> None:
    spec = SPEC.model_copy(update={"image": None})
    with pytest.raises(ConfigError, match="SLURM_JOB_ID"):
        SrunLauncher(NodeLaunch()).launch(spec, log_path=tmp_path / "log", environ={"PATH": "/usr/bin:/bin"})


# --- the squash-file import, run for real in bash with stand-ins for enroot and unsquashfs ------------------------

FAKE_ENROOT = """#!/bin/sh
# enroot import -o OUT URI : writes a "squash file" (valid when it starts with hsqs), logs the call.
echo "$*" >> "$FAKE_LOG"
[ -n "$FAKE_ENROOT_SLEEP" ] && sleep "$FAKE_ENROOT_SLEEP"
[ -n "$FAKE_ENROOT_FAIL" ] && exit 1
printf 'hsqs image of %s\\n' "$4" > "$3"
"""
FAKE_UNSQUASHFS = """#!/bin/sh
# unsquashfs -l FILE : succeeds only for files that start with the squashfs magic.
head -c 4 "$2" 2>/dev/null | grep -q hsqs
"""


@pytest.fixture
def fake_tools(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in (("enroot", FAKE_ENROOT), ("unsquashfs", FAKE_UNSQUASHFS)):
        path = bindir / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "enroot.log")}


def run_import(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def imports(tmp_path: Path) -> list[str]:
    log = tmp_path / "enroot.log"
    return log.read_text().splitlines() if log.exists() else []


def test_import_once_then_reuse_then_repair_a_corrupt_file(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    sqsh = squash_path("nvcr.io#nvidia/vllm:25.01", tmp_path / "cache")
    script = import_image_script("nvcr.io#nvidia/vllm:25.01", sqsh)
    first = run_import(script, fake_tools)
    assert first.returncode == 0, first.stderr
    assert sqsh.read_text().startswith("hsqs") and len(imports(tmp_path)) == 1
    assert imports(tmp_path)[0].endswith("docker://nvcr.io#nvidia/vllm:25.01")
    second = run_import(script, fake_tools)
    assert second.returncode == 0 and "reusing" in second.stdout and len(imports(tmp_path)) == 1
    sqsh.write_text("truncated")
    third = run_import(script, fake_tools)
    assert third.returncode == 0 and "not a valid squash file" in third.stderr
    assert len(imports(tmp_path)) == 2 and sqsh.read_text().startswith("hsqs")


def test_failed_import_leaves_no_file_and_fails(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    sqsh = tmp_path / "cache" / "x.sqsh"
    result = run_import(import_image_script("org/x:1", sqsh), {**fake_tools, "FAKE_ENROOT_FAIL": "1"})
    assert result.returncode != 0 and "enroot import of docker://org/x:1 failed" in result.stderr
    assert list((tmp_path / "cache").glob("x.sqsh*")) == [tmp_path / "cache" / "x.sqsh.lock"]


def test_concurrent_imports_of_one_image_import_once(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    sqsh = tmp_path / "cache" / "y.sqsh"
    script = import_image_script("org/y:1", sqsh)
    env = {**fake_tools, "FAKE_ENROOT_SLEEP": "1"}
    procs = [subprocess.Popen(["bash", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len(imports(tmp_path)) == 1
    assert sum("reusing" in out for out, _ in outs) == 2


def test_lock_wait_is_bounded(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    sqsh = tmp_path / "cache" / "z.sqsh"
    sqsh.parent.mkdir()
    held = tmp_path / "held"
    holder = subprocess.Popen(["flock", str(sqsh) + ".lock", "sh", "-c", f"touch {held}; sleep 30"])
    try:
        deadline = time.monotonic() + 30
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = run_import(import_image_script("org/z:1", sqsh, lock_timeout_s=1), fake_tools)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 75 and "waited 1 s" in result.stderr
    assert imports(tmp_path) == []


@pytest.mark.skipif(shutil.which("srun") is None, reason="no srun on PATH (`.ci/run` installs Slurm)")
def test_a_step_srun_refuses_names_the_users_srun_flags_in_the_fix(tmp_path: Path) -> None:
    """The real srun refuses an option it does not know before it asks the controller anything: the server 'exits
    while starting', and the fix now names node.extra_args, the user's own flags in front of the engine's command."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.ready import wait_ready

    spec = SPEC.model_copy(update={"image": None, "gpus": 0})
    launch = NodeLaunch(srun=SrunOptions(extra_args=("--no-such-srun-flag",)))
    handle = SrunLauncher(launch).launch(spec, log_path=tmp_path / "log",
                                         environ={"PATH": os.environ["PATH"], "SLURM_JOB_ID": "999999"})
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=20, poll_s=0.1)
    finally:
        handle.stop(grace_s=1)
    assert "no-such-srun-flag" in err.value.message, err.value.message  # srun's own words, in the log tail
    assert "the slurm executor's node.extra_args (--no-such-srun-flag)" in (err.value.fix or ""), err.value.fix
