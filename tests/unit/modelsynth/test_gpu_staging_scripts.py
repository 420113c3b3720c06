"""scripts/gpu: the wheel set survives chunking, transfer and reassembly bit for bit, and damage is caught early.

Runs the real scripts on fake wheels (no download, no GPU): stage_vllm.sh packs, stage_chunk.sh copies each chunk to
a stash as the device calls do, install_vllm.sh (VERIFY_ONLY) reassembles and checks every wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
GPU = REPO / "scripts" / "gpu"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None,
                                reason="needs bash and git")


def sh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=120)


def fake_wheel(folder: Path, name: str, version: str, size: int) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/blob.bin", os.urandom(size))
    return path


@pytest.fixture()
def staged(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "checkout"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    wheels = [fake_wheel(cache / "wheels", "vllm", "0.26.0", 1_500_000),
              fake_wheel(cache / "wheels", "typing-extensions", "4.16.0", 700_000)]
    stale = fake_wheel(cache / "wheels", "not-listed", "1.0", 10)
    listing = tmp_path / "list.txt"
    listing.write_text("# comment\nvllm==0.26.0\ntyping_extensions==4.16.0\n")
    args = ["--no-download", "--cache", str(cache), "--list", str(listing), "--chunk-mib", "1"]
    run = sh(str(GPU / "stage_vllm.sh"), *args, cwd=root, env={"STAGE_ROOT": str(root)})
    assert run.returncode == 0, run.stderr + run.stdout
    assert not stale.exists()  # a wheel the list does not name would be installed too: it is removed
    again = sh(str(GPU / "stage_vllm.sh"), *args, cwd=root, env={"STAGE_ROOT": str(root)})
    assert again.returncode == 0, again.stderr
    return {"root": root, "wheels": cache / "wheels", "stash": tmp_path / "stash", "site": tmp_path / "site",
            "out": tmp_path / "reassembled", "first": wheels[0]}


def test_chunks_are_small_git_ignored_and_reassemble_exactly(staged: dict[str, Path]) -> None:
    root = staged["root"]
    chunks = sorted(root.glob(".v[0-9]*"))
    assert len(chunks) == 3  # 2.2 MB of wheels in 1 MiB parts
    for chunk in chunks:
        assert sum(f.stat().st_size for f in chunk.iterdir()) <= 1024 * 1024 + 4096
        assert (chunk / "SHA256SUMS").read_text() == (chunks[0] / "SHA256SUMS").read_text()
    exclude = (root / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.v[0-9]*/") == 1  # appended once, though staged twice
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert ".v0" not in status
    env = {"STASH": str(staged["stash"]), "SITE": str(staged["site"]), "WHEEL_DIR": str(staged["out"]),
           "VERIFY_ONLY": "1"}
    early = sh(str(GPU / "install_vllm.sh"), cwd=root, env=env)
    assert early.returncode != 0 and "stage" in early.stderr
    for i in range(len(chunks)):
        run = sh(str(GPU / "stage_chunk.sh"), str(i), cwd=root, env=env)
        assert run.returncode == 0, run.stderr
    done = sh(str(GPU / "install_vllm.sh"), cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    for wheel in staged["wheels"].glob("*.whl"):
        assert (staged["out"] / wheel.name).read_bytes() == wheel.read_bytes()


def test_a_damaged_chunk_is_refused_when_staged(staged: dict[str, Path]) -> None:
    part = next((staged["root"] / ".v1").glob("part.*"))
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    run = sh(str(GPU / "stage_chunk.sh"), "1", cwd=staged["root"], env={"STASH": str(staged["stash"])})
    assert run.returncode == 1 and "stage it again" in run.stderr


def test_the_projects_vllm_list_parses() -> None:
    run = sh(str(GPU / "stage_vllm.sh"), "--dry-run", cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "99 pinned wheels" in run.stdout and "vllm==0.26.0" in run.stdout


def test_a_list_naming_a_package_twice_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text("vllm==0.26.0\nPyYAML==6.0\npyyaml==6.0.1\n")
    run = sh(str(GPU / "stage_vllm.sh"), "--dry-run", "--list", str(listing), cwd=REPO)
    assert run.returncode == 2 and "twice" in run.stderr


def installable_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel pip installs: a module and its dist-info."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f'__version__ = "{version}"\n',
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as z:
        for member, text in files.items():
            z.writestr(member, text)
        z.writestr(f"{info}/RECORD", "".join(f"{m},,\n" for m in files) + f"{info}/RECORD,,\n")
    return path


def test_a_second_wheel_set_keeps_its_own_folders_and_installs_from_the_carried_chunk(
    staged: dict[str, Path], tmp_path: Path
) -> None:
    root, cache = staged["root"], tmp_path / "peer-cache"
    (cache / "wheels").mkdir(parents=True)
    installable_wheel(cache / "wheels", "fakepeer", "1.2.3")
    listing = tmp_path / "peer.txt"
    listing.write_text("fakepeer==1.2.3\n")
    run = sh(str(GPU / "stage_vllm.sh"), "--no-download", "--cache", str(cache), "--list", str(listing),
             "--prefix", ".a", cwd=root, env={"STAGE_ROOT": str(root)})
    assert run.returncode == 0, run.stderr + run.stdout
    assert "PREFIX=.a bash scripts/gpu/stage_chunk.sh" in run.stdout
    assert sorted(p.name for p in root.glob(".a[0-9]*")) == [".a0"]
    assert len(list(root.glob(".v[0-9]*"))) == 3  # vLLM's chunks are left as they were
    assert "/.a[0-9]*/" in (root / ".git" / "info" / "exclude").read_text().splitlines()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert ".a0" not in status
    # the long call carries .a0 and installs straight from it, checking the package it names
    env = {"STASH": str(root / ".a0"), "SITE": str(tmp_path / "peer-site"), "WHEEL_DIR": str(tmp_path / "pw"),
           "PACKAGE": "fakepeer"}
    done = sh(str(GPU / "install_vllm.sh"), cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("install_vllm: fakepeer 1.2.3")
    assert (tmp_path / "peer-site" / "fakepeer" / "__init__.py").exists()


def test_a_prefix_that_git_could_not_exclude_is_refused(tmp_path: Path) -> None:
    run = sh(str(GPU / "stage_vllm.sh"), "--dry-run", "--prefix", "wheels/", cwd=REPO)
    assert run.returncode == 2 and "--prefix" in run.stderr


def test_the_projects_aiperf_list_parses() -> None:
    run = sh(str(GPU / "stage_vllm.sh"), "--dry-run", "--list", str(GPU / "aiperf-0.13.0-wheels.txt"), cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "39 pinned wheels" in run.stdout
