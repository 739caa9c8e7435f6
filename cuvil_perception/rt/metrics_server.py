"""The HTTP side of ``run --metrics [HOST:]PORT``: prometheus-client's server on its own daemon
thread, serving one `RunMetrics` plus the process collectors, up from before prewarm until
``--metrics-linger`` seconds after the last frame."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from prometheus_client import (CollectorRegistry, PlatformCollector, ProcessCollector,
                               start_http_server)

from ..errors import UsageError
from .metrics import RunMetrics
from .signals import sigint_as_keyboard_interrupt, sigterm_as_interrupt

DEFAULT_HOST = "127.0.0.1"
#: ``--metrics-linger`` default and bound, seconds: a 5 s scrape interval sees the final counts
DEFAULT_LINGER_S = 5.0
MAX_LINGER_S = 600.0


def parse_address(text: str) -> tuple[str, int]:
    """``"9100"`` -> (127.0.0.1, 9100); ``"0.0.0.0:9100"``; ``"[::1]:9100"``. Port 0 picks a free
    one. A malformed value is a UsageError naming --metrics."""
    host, port = DEFAULT_HOST, text.strip()
    if port.startswith("["):
        host, _, port = port[1:].partition("]")
        port = port.removeprefix(":") if port.startswith(":") else "?"
    elif ":" in port:
        host, _, port = port.rpartition(":")
    if not port.isdigit() or not host or int(port) > 65535:
        raise UsageError(f"--metrics {text!r}: expected [HOST:]PORT with PORT 0..65535 "
                         f"(HOST defaults to {DEFAULT_HOST})")
    return host, int(port)


class MetricsServer:
    """prometheus-client's HTTP server on ``address`` serving one `RunMetrics` (``pipeline``:
    its name for build_info / run_state) and the ``process_*`` / ``python_info`` metrics."""

    def __init__(self, address: str, pipeline: str = ""):
        self.host, port = parse_address(address)
        self.metrics = RunMetrics(pipeline)
        registry = CollectorRegistry()
        registry.register(self.metrics)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        try:
            self._server, self._thread = start_http_server(port, self.host, registry=registry)
        except OSError as exc:
            raise UsageError(f"--metrics {address}: cannot listen on {self.host}:{port} "
                             f"({exc.strerror or exc})") from None
        self.port = self._server.server_port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def linger(self, seconds: float, note) -> None:
        """Keep serving ``seconds`` more (the final counts, state ``finished``); Ctrl-C or
        SIGTERM ends the wait at once. Main thread only (signals)."""
        if seconds <= 0:
            return
        try:
            with sigterm_as_interrupt(), sigint_as_keyboard_interrupt():
                note(f"metrics stay at {self.url} for {seconds:g} s (--metrics-linger; "
                     "Ctrl-C ends it)")
                _sleep_interruptibly(seconds)
        except KeyboardInterrupt:
            note(f"metrics at {self.url} closed early (Ctrl-C / SIGTERM during --metrics-linger)")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _sleep_interruptibly(seconds: float) -> None:
    """``time.sleep(seconds)`` in slices of at most 0.25 s: a signal whose handler was tripped
    just before a sleep began (it did not cut that sleep short) still ends the wait within a
    slice, because Python runs pending handlers between slices."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.25))


@contextmanager
def serve_for_run(address: str | None, note, pipeline: str = "",
                  linger_s: float = 0.0) -> Iterator[MetricsServer | None]:
    """``run --metrics``: serve from now until the block ends, plus ``linger_s`` seconds when it
    ends normally (not on an error or an interrupted run's exit); ``note`` gets the URL. The
    caller adds ``server.metrics`` to the run's ``RunOptions.monitors`` (the executor attaches
    it). None: nothing is served."""
    if address is None:
        yield None
        return
    server = MetricsServer(address, pipeline)
    note(f"metrics at {server.url}")
    try:
        yield server
        server.linger(linger_s, note)
    finally:
        server.close()
