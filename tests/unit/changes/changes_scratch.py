"""A scratch git repository with one recipe, for the change-control tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

RECIPE = """\
chg-sim:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 256
      osl: 64
      search-space:
      - {{ tp: 4, conc-list: {tp4_concs} }}
      - {{ tp: 8, conc-list: [2, 4] }}
  serve:
    engine: {{ name: sim }}
    env:
      SHARED_VAR: "1"
    overrides:
    - when: {{ tp: 8 }}
      env:
        ARM_VAR: "{arm_var}"
  workload:
    num-prompts-per-conc: 4
    num-warmups: 1
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def write_recipe(repo: Path, *, tp4_concs: str = "[2, 4]", arm_var: str = "a") -> Path:
    path = repo / "recipes" / "chg.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECIPE.format(tp4_concs=tp4_concs, arm_var=arm_var))
    return path


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def scratch_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose second commit adds a concurrency to the tp4 arm and changes the tp8 arm's env var."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    base = commit(repo, "base")
    write_recipe(repo, tp4_concs="[2, 4, 8]", arm_var="b")
    head = commit(repo, "head")
    return repo, base, head


MULTINODE_RECIPE = """\
mn-sim:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi355x-disagg
  precision: fp8
  framework: sglang-disagg
  multinode: true
  disagg: true
  kv-p2p-transfer: mori
  scenarios:
    fixed-seq-len:
    - isl: {isl}
      osl: {osl}
      search-space:
      - conc-list: {concs}
        prefill: {{num-worker: 2, tp: 8, ep: 8, dp-attn: true}}
        decode: {{num-worker: 1, tp: 8, ep: 1, dp-attn: false}}
  serve:
    engine: {{ name: sim }}
    env:
      MN_VAR: "{mn_var}"
  workload:
    num-prompts-per-conc: 4
    num-warmups: 1
"""
"""A multinode disaggregated arm on the simulator: one deployment that runs its whole concurrency list."""


def write_multinode(repo: Path, *, concs: str = "[2, 4]", mn_var: str = "a", isl: int = 256, osl: int = 64) -> Path:
    path = repo / "recipes" / "mn.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MULTINODE_RECIPE.format(concs=concs, mn_var=mn_var, isl=isl, osl=osl))
    return path


def multinode_repo(tmp_path: Path, *head: dict[str, object]) -> tuple[Path, list[str]]:
    """A repository whose first commit holds the multinode arm at [2, 4], then one commit per `head` (the keyword
    arguments of `write_multinode`); returns the repository and the commits."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_multinode(repo)
    revs = [commit(repo, "base")]
    for n, kw in enumerate(head):
        write_multinode(repo, **kw)  # type: ignore[arg-type]
        revs.append(commit(repo, f"change {n}"))
    return repo, revs
