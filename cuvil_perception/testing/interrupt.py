"""Start a Python child process that Ctrl-C (SIGINT) interrupts, whatever its parent ignores.

A process started in the background by a non-interactive shell (``cmd &``, some CI runners,
``nohup``) inherits SIGINT *ignored*, and Python then leaves it ignored instead of raising
KeyboardInterrupt: a test that sends SIGINT to its child would see the child run to the end.
These argv builders arm Python's own SIGINT handler in the child before anything else runs.

::

    proc = subprocess.Popen(cli_argv("run", "p.yaml"), ...)
    proc.send_signal(signal.SIGINT)  # KeyboardInterrupt in the child, even under ``nohup``
"""

from __future__ import annotations

import sys

ARM_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def python_argv(code: str) -> list[str]:
    """``python -c CODE`` with SIGINT raising KeyboardInterrupt (append the script's args)."""
    return [sys.executable, "-c", ARM_SIGINT + code]


def cli_argv(*args: str) -> list[str]:
    """``python -m cuvil_perception ARGS`` with SIGINT raising KeyboardInterrupt."""
    run = "import runpy\nrunpy.run_module('cuvil_perception', run_name='__main__')\n"
    return python_argv(run) + list(args)
