"""SIGTERM ends a run the way Ctrl-C does: frames already running finish, sinks close, the run
record is written with ``status: "terminated"``, and the CLI exits with 143 (128 + SIGTERM)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGINT_EXIT_CODE = 130  # 128 + SIGINT
SIGTERM_EXIT_CODE = 143  # 128 + SIGTERM


class RunTerminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM during a run (a KeyboardInterrupt, so every place
    that ends a run cleanly on Ctrl-C does the same on SIGTERM)."""


def stop_signal(exc: BaseException) -> str:
    """"SIGTERM" for ``RunTerminated``, else "SIGINT"."""
    return "SIGTERM" if isinstance(exc, RunTerminated) else "SIGINT"


@contextmanager
def sigint_as_keyboard_interrupt():
    """While the block runs (main thread only), Ctrl-C raises ``KeyboardInterrupt`` whatever
    handler a library installed before (Ray's driver, an embedding application): a wait that
    says "Ctrl-C ends it" must end on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def sigterm_as_interrupt():
    """While the block runs (main thread only), SIGTERM raises ``RunTerminated`` once; a second
    SIGTERM during the clean-up is ignored so the record still gets written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = []

    def handler(signum, frame):
        if not fired:
            fired.append(signum)
            raise RunTerminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
