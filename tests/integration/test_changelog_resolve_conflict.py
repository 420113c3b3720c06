"""`llmsweep changelog resolve-conflict` on a real conflicting `git merge`: main and a pull request's branch both
appended to perf-changelog.yaml since they parted; merging main into the branch stops on the changelog, and the
command resolves it so that the merge commits and the changelog validates against main."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEY = "qwen3.5-fp8-mi300x-sim-agentic-mtp"
PULL = "https://github.com/SemiAnalysisAI/InferenceX/pull/"
CHANGELOG = "perf-changelog.yaml"


def entry(link: str, why: str) -> str:
    return f"- config-keys: [{KEY}]\n  description:\n  - {why}\n  pr-link: {link}\n"


HISTORY = entry(PULL + "1", "first sweep")
PR_SIDE = HISTORY + "\n" + entry("XXX", "the pull request's change") + "\n" + entry("XXX", "cherry-picked to main")
MAIN_SIDE = HISTORY + "\n" + entry(PULL + "40", "main's change") + "\n" + entry(PULL + "42", "cherry-picked to main")


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          capture_output=True, text=True, check=check)


def llmsweep(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=120)


def conflicted_merge(tmp_path: Path, pr_side: str = PR_SIDE) -> Path:
    """A repository on branch `pr` in the middle of `git merge main`, stopped on a conflict in the changelog."""
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shutil.copy(REPO / "examples" / "quickstart.yaml", repo / "recipes" / "quickstart.yaml")
    (repo / CHANGELOG).write_text(HISTORY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    (repo / CHANGELOG).write_text(pr_side)
    git(repo, "commit", "-q", "-am", "the pull request")
    git(repo, "checkout", "-q", "main")
    (repo / CHANGELOG).write_text(MAIN_SIDE)
    git(repo, "commit", "-q", "-am", "main moves on")
    git(repo, "checkout", "-q", "pr")
    merge = git(repo, "merge", "main", check=False)
    assert merge.returncode != 0 and f"CONFLICT (content): Merge conflict in {CHANGELOG}" in merge.stdout
    return repo


def test_resolve_conflict_keeps_main_appends_the_pull_request_and_stages_it(tmp_path: Path) -> None:
    repo = conflicted_merge(tmp_path)
    assert git(repo, "status", "--porcelain").stdout == f"UU {CHANGELOG}\n"
    res = llmsweep(repo, "changelog", "resolve-conflict", "--pr-number", "42", "--json")
    assert res.returncode == 0, res.stderr
    # main's bytes, then the one entry main lacks, after one blank line and with this pull request's link; the entry
    # main already has (under its canonical link) is not appended twice
    assert (repo / CHANGELOG).read_text() == MAIN_SIDE + "\n" + entry(PULL + "42", "the pull request's change")
    doc = json.loads(res.stdout)
    assert (doc["appended_lines"], doc["dropped_lines"], doc["staged"]) == ([16], [11], True)
    assert git(repo, "status", "--porcelain").stdout == f"M  {CHANGELOG}\n"  # staged, nothing left unmerged
    check = llmsweep(repo, "changelog", "--base", "main", "--pr-number", "42", "--final-links", "--json")
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["added"] == 1
    git(repo, "commit", "-q", "--no-edit")
    assert git(repo, "show", f"main:{CHANGELOG}").stdout == MAIN_SIDE  # main itself is untouched
    assert git(repo, "log", "-1", "--format=%P").stdout.count(" ") == 1  # a merge commit


def test_resolve_conflict_refuses_with_nothing_left_and_outside_a_merge(tmp_path: Path) -> None:
    only_picked = HISTORY + "\n" + entry("XXX", "cherry-picked to main")
    repo = conflicted_merge(tmp_path, pr_side=only_picked)
    conflicted = (repo / CHANGELOG).read_text()
    res = llmsweep(repo, "changelog", "resolve-conflict", "--pr-number", "42")
    assert res.returncode == 2
    assert f":2:{CHANGELOG}: every entry the pull request appends (line 6) is already on main" in res.stderr
    assert f"git checkout --theirs -- {CHANGELOG}" in res.stderr
    assert (repo / CHANGELOG).read_text() == conflicted  # nothing written, still unmerged
    assert git(repo, "status", "--porcelain").stdout == f"UU {CHANGELOG}\n"
    git(repo, "merge", "--abort")
    outside = llmsweep(repo, "changelog", "resolve-conflict", "--pr-number", "42")
    assert outside.returncode == 2 and "no merge is in progress" in outside.stderr
