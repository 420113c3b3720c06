"""Another process's server on a port: what a launch on that port must not take for itself."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def holder(port: int, version: dict[str, object] | None = None, host: str = "127.0.0.1") -> Iterator[None]:
    """Another process's server on `host`:`port`: /health 200, and `version` at /version (404 without)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/version" and version is None:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(version if self.path == "/version" else {}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
