"""A stdlib HTTP server on a free loopback port, served from a thread for the length of a `with` block: the one way
tests stand up a small scripted server (`with serving(Handler) as url: ...`)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def json_doc(doc: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    """A handler answering every GET with `doc` as JSON, as it is at the time (a test may change it between requests):
    a server's `/version` for a read-back, `with serving(json_doc(said)) as url`."""

    class JsonDoc(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    return JsonDoc
