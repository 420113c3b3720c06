"""A stand-in for the lead's `run --_worker` entry point, for the real-Slurm tests.

It does on the node what the lifecycle will do: pick the node launcher the batch job names, resolve the port, launch
the server, wait until ready, run a client command against it, write artifacts into the out dir, tear down, and exit
non-zero when any step failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LlmsweepError
from llmsweep.execute.preflight import resolve_port
from llmsweep.execute.pyxis import node_launcher_from_env
from llmsweep.execute.ready import wait_ready


def main(group_file: str, out: str) -> int:
    out_dir = Path(out)
    group = json.loads(Path(group_file).read_text())
    spec = resolve_port(LaunchSpec.model_validate(group["spec"]))
    launcher = node_launcher_from_env()
    handle = launcher.launch(spec, log_path=out_dir / "server.log")
    result: dict[str, object] = {"job_id": os.environ.get("SLURM_JOB_ID"), "launcher": launcher.kind,
                                 "command": list(handle.command)}
    try:
        wait_ready(handle, timeout_s=spec.startup_timeout_s, poll_s=0.2)
        client = [part.replace("{base_url}", handle.base_url) for part in group["client"]]
        proc = subprocess.run(client, capture_output=True, text=True, timeout=60)
        result["client_rc"] = proc.returncode
        (out_dir / "client_output.txt").write_text(handle.scrubber.scrub(proc.stdout))
        return proc.returncode
    except LlmsweepError as exc:
        result["error"] = str(exc)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        result["server_rc"] = handle.stop(grace_s=5.0)
        handle.scrubber.write_text(out_dir / "result.json", json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
