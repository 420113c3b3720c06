"""What keying a run's jobs costs when their server's environment names a search path of system folders.

`serve.env: {PATH: /usr/local/bin:/usr/bin}` makes each folder of the path part of every job's reuse key
(`changes.reuse.SEARCH_PATH_VARS`). Keying a folder reads its small files' bytes up to `FOLDER_READ_BYTES` and counts
the rest by name, size and modification time; a process remembers a folder's digest by its files' status.

Run: `.venv/bin/python bench/reuse_key_cost.py [--jobs 20] [--path /usr/local/bin:/usr/bin] [--rounds 3]`. Prints,
for a recipe of `--jobs` simulated jobs sharing that `serve.env`, the wall and CPU seconds of `reuse_keys` (what `run`
computes once per invocation), the bytes each way reads, and how many times a folder was keyed:

- `whole`: every small file of each folder read (no read budget: what keying did before the budget), the baseline;
- `bounded`: the read budget, nothing remembered (a fresh `llmsweep run` process);
- `remembered`: the budget, in a process that keyed the same folders before (no file read).

Each way is run `--rounds` times, the order alternating (a shared machine's slow spells hit every way); the minimum
is printed. The page cache is warm after the first round: on a cold cache the `whole` read costs disk time too.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsweep.changes import reuse  # noqa: E402
from llmsweep.plan import Job, jobs_from_files  # noqa: E402

RECIPE = """\
key-cost:
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
      - {{ tp: 8, conc-list: {concs} }}
  serve:
    engine: {{ name: sim }}
    env:
      PATH: "{path}"
"""


def _jobs(n: int, path: str, where: Path) -> list[Job]:
    recipe = where / "recipe.yaml"
    recipe.write_text(RECIPE.format(concs=list(range(1, n + 1)), path=path))
    return jobs_from_files([recipe])


@contextmanager
def _counted() -> Iterator[dict[str, int]]:
    """Counts `_path_digest` calls and the bytes `Path.read_bytes` returns while keying."""
    seen = {"keyed": 0, "bytes": 0}
    digest, read = reuse._path_digest, Path.read_bytes

    def keyed(path: Path, *, tree: bool = False) -> str:
        seen["keyed"] += 1
        return digest(path, tree=tree)

    def counted_read(self: Path) -> bytes:
        data = read(self)
        seen["bytes"] += len(data)
        return data

    reuse._path_digest = keyed
    Path.read_bytes = counted_read  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        reuse._path_digest = digest
        Path.read_bytes = read  # type: ignore[method-assign]


def _timed(jobs: list[Job], budget: int, remembered: bool) -> tuple[float, float, dict[str, int]]:
    saved = reuse.FOLDER_READ_BYTES
    reuse.FOLDER_READ_BYTES = budget
    try:
        if remembered:
            reuse.reuse_keys(jobs, simulate=True)
        else:
            reuse._DIGESTS.clear()
        with _counted() as seen:
            wall, cpu = time.perf_counter(), time.process_time()
            reuse.reuse_keys(jobs, simulate=True)
            return time.perf_counter() - wall, time.process_time() - cpu, seen
    finally:
        reuse.FOLDER_READ_BYTES = saved
        reuse._DIGESTS.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--path", default="/usr/local/bin:/usr/bin")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        jobs = _jobs(args.jobs, args.path, Path(tmp))
        ways: dict[str, Callable[[], tuple[float, float, dict[str, int]]]] = {
            "whole": lambda: _timed(jobs, 1 << 62, remembered=False),
            "bounded": lambda: _timed(jobs, reuse.FOLDER_READ_BYTES, remembered=False),
            "remembered": lambda: _timed(jobs, reuse.FOLDER_READ_BYTES, remembered=True),
        }
        best: dict[str, tuple[float, float, dict[str, int]]] = {}
        for r in range(args.rounds):
            for name in (list(ways) if r % 2 == 0 else list(reversed(ways))):
                got = ways[name]()
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
    print(f"reuse_keys of {len(jobs)} jobs, serve.env PATH={args.path} (min of {args.rounds} rounds; "
          f"FOLDER_READ_BYTES={reuse.FOLDER_READ_BYTES >> 20} MiB)")
    base = best["whole"][0]
    for name, (wall, cpu, seen) in best.items():
        print(f"  {name:<10} wall {wall:7.3f} s  cpu {cpu:7.3f} s  read {seen['bytes'] / 2**20:8.1f} MiB  "
              f"folders keyed {seen['keyed']:3d}  whole/this {base / wall:6.1f}x")


if __name__ == "__main__":
    main()
