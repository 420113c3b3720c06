"""`run --executor docker` keys a job's search-path folders as the container sees them: one the executor does not
mount from this host is the image's copy (keyed as its text, the image's reference keys what it holds), one it mounts
by what the mount's source holds on this host, at its own path or another — the executor's mounts reach the reuse
keys `run.json` records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_run_support import cli_env, run_here

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "changes"))
from changes_scratch import write_recipe


def _recorded(tmp_path: Path, recipe: Path, name: str, *options: str) -> dict[str, dict[str, str]]:
    """The reuse parts a docker run of `recipe` records, by job, its fake daemon starting nothing (the jobs'
    tokenizer is not fetched offline: every job is refused after its key is recorded)."""
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'fake docker: nothing runs' >&2\nexit 1\n")
    docker.chmod(0o755)
    env = cli_env(tmp_path, HF_HUB_OFFLINE="1")
    args: list[str | Path] = [recipe, "--executor", "docker", "--executor-option", f"docker={docker}",
                              "--out", tmp_path / name, "--no-report", "--json"]
    for option in options:
        args += ["--executor-option", option]
    run_here(args, env)
    meta = json.loads((tmp_path / name / "run.json").read_text())
    keys = meta["reuse_keys"]
    assert keys, name
    return {job: meta["reuse_parts"][key.partition("/")[0]] for job, key in keys.items()}  # by job: by identity


def test_a_docker_run_keys_a_search_path_folder_by_what_the_container_reads(tmp_path: Path) -> None:
    libs = tmp_path / "cuda" / "lib64"
    libs.mkdir(parents=True)
    (libs / "libcudart.so").write_bytes(b"\x7fELF 12.4")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace("    engine: { name: sim }\n", "").replace(
        '      SHARED_VAR: "1"\n', f'      SHARED_VAR: "1"\n      LD_LIBRARY_PATH: {libs}\n'))
    image = _recorded(tmp_path, recipe, "image")
    assert all("local_files" not in p for p in image.values()), image  # the image's copy: its text, in the launch
    mounted = _recorded(tmp_path, recipe, "mounted", f"extra_mounts=[{libs}:{libs}:ro]")
    assert all("local_files" in p for p in mounted.values()), mounted
    (libs / "libcudart.so").write_bytes(b"\x7fELF 12.8")  # edited on the host: the mounted copy moves its key
    again = _recorded(tmp_path, recipe, "again", f"extra_mounts=[{libs}:{libs}:ro]")
    assert all(again[k]["local_files"] != p["local_files"] for k, p in mounted.items())
    assert _recorded(tmp_path, recipe, "unmounted") == image  # the image's copy: as it was


def test_a_docker_run_keys_patches_mounted_elsewhere_by_their_host_folder(tmp_path: Path) -> None:
    """`PYTHONPATH: /opt/patches` with `extra_mounts=[/host/patches:/opt/patches:ro]`: the server imports the host's
    patches; editing them there had kept the key, and `--reuse` stood on results of the old patches."""
    source, seen = tmp_path / "host" / "patches", tmp_path / "opt" / "patches"  # `seen`: the container's path
    (source / "vllm").mkdir(parents=True)
    (source / "vllm" / "sched.py").write_text("PATCH = 1\n")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace("    engine: { name: sim }\n", "").replace(
        '      SHARED_VAR: "1"\n', f'      SHARED_VAR: "1"\n      PYTHONPATH: {seen}\n'))
    mount = f"extra_mounts=[{source}:{seen}:ro]"
    image = _recorded(tmp_path, recipe, "image")
    assert all("local_files" not in p for p in image.values()), image  # not mounted: the image's folder, its text
    mounted = _recorded(tmp_path, recipe, "mounted", mount)
    assert all("local_files" in p for p in mounted.values()), mounted
    (source / "vllm" / "sched.py").write_text("PATCH = 2\n")  # the patches edited on the host
    again = _recorded(tmp_path, recipe, "again", mount)
    assert all(again[k]["local_files"] != p["local_files"] for k, p in mounted.items())
