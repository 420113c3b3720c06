"""A server that starts as uvicorn does under `transformers serve`: `Application startup complete.` before it binds,
then the bind; a port another process holds is said in uvicorn's words and the process lives on (a non-daemon thread
holds it, as transformers' batching thread does for a few seconds). Bound, it prints `Uvicorn running on` and answers
/health.

  uvicorn_like.py --port N
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()  # what keeps the process alive
    print("INFO:     Started server process", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = json.dumps({"path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *a: object) -> None:
            pass

    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as exc:
        print(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
              f"('{args.host}', {args.port}): {(exc.strerror or '').lower()}", flush=True)
        print("INFO:     Waiting for application shutdown.", flush=True)
        print("INFO:     Application shutdown complete.", flush=True)
        return 3  # (the non-daemon thread keeps the process)
    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
