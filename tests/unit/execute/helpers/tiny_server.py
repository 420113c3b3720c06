"""A tiny real HTTP server for executor tests: /health turns 200 after a delay, then a ready marker is printed.

Options let a test make it spawn children (one in its own session, as daemonising libraries do), die during start-up,
ignore SIGTERM, or echo an environment variable (to check secrets reach the process but not the log).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLEEPER = "import time\nwhile True: time.sleep(1)"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before /health answers 200")
    parser.add_argument("--marker", default="tiny server ready")
    parser.add_argument("--echo-env", action="append", default=[])
    parser.add_argument("--spawn-children", default=None, help="write child PIDs (same group, new session) here")
    parser.add_argument("--exit-after", type=float, default=None, help="exit with status 3 after this many seconds")
    parser.add_argument("--ignore-term", action="store_true")
    args = parser.parse_args()

    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def graceful(signum: int, frame: object) -> None:
            print("tiny server got SIGTERM, shutting down", flush=True)
            os._exit(0)

        signal.signal(signal.SIGTERM, graceful)
    for name in args.echo_env:
        print(f"env {name}={os.environ.get(name, '')}", flush=True)
    if args.spawn_children:
        same_group = subprocess.Popen([sys.executable, "-c", SLEEPER])
        own_session = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
        with open(args.spawn_children, "w") as fh:
            fh.write(f"{same_group.pid}\n{own_session.pid}\n")
    print(f"tiny server starting on {args.host}:{args.port} (pid {os.getpid()})", flush=True)
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        print("fatal: tiny server gave up during start-up (simulated CUDA out of memory)", flush=True)
        return 3

    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                ok = time.monotonic() - started >= args.delay
                self._send(200 if ok else 503, {"ok": ok})
            else:
                self._send(200, {"path": self.path, "pid": os.getpid()})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)

    def announce() -> None:
        time.sleep(args.delay)
        print(args.marker, flush=True)

    threading.Thread(target=announce, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
