"""Joining Ray the way Ray's own tools do, and keeping Ray's chatter off the terminal.

``--ray`` ADDRESS:

- ``auto``: the cluster ``RAY_ADDRESS`` names when it is set (what ``ray job submit`` sets for
  its entrypoint), else the cluster started on this machine (``ray start``);
- ``HOST:PORT`` / ``ray://HOST:10001``: that cluster, whatever ``RAY_ADDRESS`` says (the
  address on the command line wins); ``ray://`` needs Ray's client (``ray[client]``, in the
  ``fleet`` extra);
- ``local``: a private Ray on this machine, bound to 127.0.0.1, stopped at the end, even when
  ``RAY_ADDRESS`` is set.

``join`` returns one line saying which cluster was joined. A refusal (nothing listening, a
token the cluster's auth refuses, a version mismatch) is a ``UsageError`` carrying Ray's own
reason, in one line, and the fix: what Ray's C++ client prints while it retries (the reason a
``ConnectionError`` leaves out, e.g. ``Unauthenticated: ... InvalidAuthToken``) goes to the log
file and its last reason into the message.

Loopback: Ray rewrites ``127.0.0.1`` and ``localhost`` to the machine's network address (so
that other machines could reach it), in ``ray.init`` and in ``ray start --node-ip-address``
alike. ``local`` keeps its one-node Ray on 127.0.0.1 (Ray's single-machine mode,
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which refuses a second node). A several-node cluster
on one machine stays on the loopback under another 127.x address, which Ray leaves as it is:
``ray start --head --node-ip-address 127.0.0.2`` and ``--ray 127.0.0.2:PORT`` (the driver then
joins as 127.0.0.2 too). With ``--ship-package`` the driver's cuvil_perception reaches
every worker through Ray's ``runtime_env`` (``py_modules``).

``route_logs`` sends Ray's own messages for the driver (its ``ray`` logger, and the
raylet's error messages it would print: worker deaths, lost nodes) to a file, ``OUT/ray.log``.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError

INSTALL_HINT = "pip install 'cuvil-perception[fleet]'"
LOCAL_IP = "127.0.0.1"
_OPTIONS = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}


def join(ray, address: str, ship_package: bool, log_path: Path | None = None) -> str:
    """``ray.init`` for ``address`` (module docstring); returns what was joined. ``log_path``:
    where Ray's own output during the join goes (else a temporary file)."""
    import tempfile

    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="cuvil-ray-")) / "ray.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _stderr_into(log_path):
            return _join(ray, address, ship_package)
    except Exception as exc:  # noqa: BLE001 - Ray raises many types here; each gets one line
        verb = "start" if address == "local" else "join"
        raise UsageError(f"--ray {address}: cannot {verb} Ray: {_reason(exc, log_path)}; "
                         f"{_fix(exc, address, log_path)} (Ray's log: {log_path})") from None


def _join(ray, address: str, ship_package: bool) -> str:
    options = dict(_OPTIONS)
    if ship_package:
        options["runtime_env"] = {"py_modules": [str(Path(__file__).resolve().parents[1])]}
    from_env = os.environ.get("RAY_ADDRESS", "").strip()
    target = from_env if address == "auto" and from_env else address
    host = _loopback_host(target)
    if host is not None:  # this machine's own cluster: join it as a node on that address
        options["_node_ip_address"] = host
    if address == "local":
        with _without_ray_address(), _on_loopback(ray):
            # address="local": Ray's word for a new instance (None would join a cluster that
            # `ray start` left on this machine)
            ray.init(address="local", num_cpus=os.cpu_count() or 1,
                     _node_ip_address=LOCAL_IP, **options)
        return f"started a local Ray on {LOCAL_IP}"
    if address == "auto":
        ray.init(address="auto", **options)
        source = f"RAY_ADDRESS={from_env}" if from_env else "the cluster on this machine"
        return f"joined the Ray cluster at {_gcs(ray) or from_env} ({source})"
    with _without_ray_address():
        ray.init(address=address, **options)
    return f"joined the Ray cluster at {_gcs(ray) or address}"


def _loopback_host(address: str) -> str | None:
    """The host of ``address`` when it is a 127.x address other than 127.0.0.1, else None."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return None
    host = address.rsplit(":", 1)[0].strip("[]")
    return host if host.startswith("127.") and host != "127.0.0.1" else None


@contextmanager
def _on_loopback(ray):
    """Ray's single-machine mode while inside (the Ray processes started inside inherit it):
    127.0.0.1 stays 127.0.0.1. Restored after, so that later Ray processes of this program
    (a ``ray start`` of another node) are not refused as a second node."""
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    patched = constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER")
    before = constants.ENABLE_RAY_CLUSTER if patched else None
    if patched:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if patched:
            constants.ENABLE_RAY_CLUSTER = before
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


@contextmanager
def _stderr_into(path: Path):
    """File descriptor 2 (where Ray's C++ code logs) appended to ``path`` while inside."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def _without_ray_address():
    """``RAY_ADDRESS`` unset while inside (Ray would prefer it to the address given)."""
    saved = os.environ.pop("RAY_ADDRESS", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


def _gcs(ray) -> str | None:
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - a client connection has no GCS address to show
        return None


def _reason(exc: BaseException, log_path: Path) -> str:
    """Ray's message in one line (its help text included), at most 400 characters, and the
    last RPC error Ray's client logged while it retried (the reason a ConnectionError hides)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    reason = f"{type(exc).__name__}: {text[:400]}"
    logged = _logged_rpc_error(log_path)
    return f"{reason} ({logged})" if logged and logged not in text else reason


def _logged_rpc_error(log_path: Path) -> str | None:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-200:]
    except OSError:
        return None
    for line in reversed(lines):
        for mark in ("Unauthenticated:", "RPC error:", "Unavailable:", "PermissionDenied:"):
            if mark in line:
                return " ".join(line[line.index(mark):].split())[:300]
    return None


def _fix(exc: BaseException, address: str, log_path: Path) -> str:
    text = (str(exc) + " " + (_logged_rpc_error(log_path) or "")).lower()
    if isinstance(exc, ImportError) or "ray[client]" in text or "grpc" in text:
        return f"ray:// addresses need Ray's client: {INSTALL_HINT} (installs ray[client])"
    if type(exc).__name__ == "AuthenticationError" or "token" in text or "unauth" in text:
        return ("the cluster wants Ray's token auth: set RAY_AUTH_MODE=token here (Ray never "
                "turns it on by itself for an address given) and give the cluster's token "
                "(RAY_AUTH_TOKEN, or a file: RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token; "
                "`ray get-auth-token` on the head prints it)")
    if "version" in text and "mismatch" in text:
        return "install the cluster's Ray version here (and the same Python)"
    if address == "local":
        return "see the message above; --local runs without Ray"
    return ("is the cluster running and reachable from here? (`ray status --address ADDRESS`; "
            "start one with `ray start --head --node-ip-address 127.0.0.1`, or use --ray local)")


@contextmanager
def route_logs(ray, path: Path | None):
    """While inside: Ray's driver-side messages go to ``path`` (appended), not the terminal."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("ray")
    saved = (logger.handlers[:], logger.propagate)
    logger.handlers[:] = [handler]
    logger.propagate = False
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is not None:  # the raylet's error messages (a worker died, a node was lost)
        worker.print_to_stdstream = lambda data, ignore_prefix=False: _to_file(handler, data)
    try:
        yield
    finally:
        logger.handlers[:], logger.propagate = saved
        if printer is not None:
            worker.print_to_stdstream = printer
        handler.close()


def _to_file(handler: logging.FileHandler, data: dict) -> None:
    for line in data.get("lines", []):
        handler.emit(logging.makeLogRecord({"name": f"ray.{data.get('pid')}", "msg": line,
                                            "levelname": "INFO", "levelno": logging.INFO}))
