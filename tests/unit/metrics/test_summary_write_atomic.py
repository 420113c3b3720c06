"""A summary.json is written whole or not at all: a reader (`report`, `--resume`, the store) that opens it while it is
being written, or after the writer was killed mid-write, never sees an empty or partial file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

WRITER = """
import sys
from pathlib import Path
from llmsweep.metrics.model import Summary
summary, target = Summary.load(Path(sys.argv[1])), Path(sys.argv[2])
summary.write(target)
print("ready", flush=True)
while True:
    summary.write(target)
"""


def test_a_summary_read_while_written_or_killed_mid_write_is_whole(tmp_path: Path) -> None:
    """`Summary.write` truncated summary.json and wrote it in place: a SIGKILL mid-write (the run killed as the
    client wrote its summary) left an empty or partial file, and a reader at that moment saw one too. A real writer
    process rewrites the file in a loop while this test reads it, then is SIGKILLed: every read, and the file it
    leaves, is the whole summary."""
    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=4), requests=400)])
    (source,) = sorted(run.path.glob("jobs/*/summary.json"))
    whole = json.loads(source.read_text(encoding="utf-8"))
    target = tmp_path / "out" / "summary.json"
    target.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(source), str(target)], stdout=subprocess.PIPE,
                              env=env, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        reads, torn = 0, []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                text = target.read_text(encoding="utf-8")
            except FileNotFoundError:  # never: the file exists from the first write on
                torn.append("missing")
                continue
            reads += 1
            try:
                assert json.loads(text) == whole
            except (ValueError, AssertionError):
                torn.append(f"{len(text)} bytes")
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert reads > 0
    assert not torn, f"{len(torn)} of {reads} reads saw a partial summary.json: {torn[:5]}"
    assert json.loads(target.read_text(encoding="utf-8")) == whole  # what the kill left reads whole
    assert [p.name for p in target.parent.iterdir() if p.name != "summary.json.tmp"] == ["summary.json"]
