"""A tiny Prometheus endpoint: ``GET /metrics`` answers with the text a
callback returns. Binds to 127.0.0.1 unless told otherwise; runs in a daemon
thread; :meth:`MetricsServer.close` stops it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..errors import BpfError

__all__ = ["MetricsServer"]


class MetricsServer:
    """Serve ``render()`` at ``http://ADDR:PORT/metrics``.

    :raises BpfError: the port cannot be bound (in use, or privileged).
    """

    def __init__(self, port: int, render: Callable[[], str], addr: str = "127.0.0.1") -> None:
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served")
                    return
                try:
                    with lock:
                        body = render().encode()
                except Exception as e:
                    self.send_error(500, f"cannot read the maps: {e}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        try:
            self._server = ThreadingHTTPServer((addr, port), Handler)
        except OSError as e:
            raise BpfError(e.errno or 98, f"cannot serve Prometheus metrics on {addr}:{port} ({e.strerror}); "
                           "choose another port with --prometheus PORT") from None  # fmt: skip
        self._server.daemon_threads = True
        self.address = self._server.server_address
        self._thread = threading.Thread(target=self._server.serve_forever, name="bpfmux-metrics", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where the metrics are."""
        host, port = self.address[0], self.address[1]
        if not isinstance(host, str):  # an AF_INET server's address is text; the socket types allow bytes
            host = bytes(host).decode()
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
