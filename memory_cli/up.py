"""`hindsight up`: Hindsight as a service on one machine, and `hindsight deploy`.

`up` starts a Prefect server, deploys the flows (the nightly one on its cron), and runs a
process worker, the read API and the MCP server over HTTP, each in its own process group
with its log under <data_dir>/logs. Ctrl-C (SIGINT) or SIGTERM stops them all: the worker
first, then the servers; flow runs the worker started (Prefect gives each its own session)
are found by a marker in their environment, so none is left behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import console, err_console, table

if TYPE_CHECKING:
    from memory_cli.processes import Services


if TYPE_CHECKING:
    from memory_core.settings import Settings


def _bin(name: str) -> str:
    """A console script of this environment (prefect, hindsight), beside this Python."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def child_env(settings: Settings, api_url: str) -> dict[str, str]:
    """The environment every service shares: settings by absolute path, this Prefect API."""
    from memory_cli.processes import MARKER

    env = dict(os.environ)
    data_dir = settings.data_dir.resolve()
    env["HINDSIGHT_DATA_DIR"] = str(data_dir)
    env["PREFECT_API_URL"] = api_url
    env.setdefault("PREFECT_HOME", str(data_dir / "prefect"))
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # the worker asks for due runs every 10 s by default: a triggered run starts sooner
    env.setdefault("PREFECT_WORKER_QUERY_SECONDS", "2")
    env.setdefault(MARKER, uuid.uuid4().hex)  # a test may choose it, to look for orphans
    return env


@contextlib.contextmanager
def _stop_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM end the wait loop instead of raising inside a child wait."""
    got: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: got.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield got
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def deploy_quietly(api_url: str) -> int:
    """The work pool and every deployment on the given Prefect API; how many."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.deployments import deploy_all

    with temporary_settings({PREFECT_API_URL: api_url}), contextlib.redirect_stdout(io.StringIO()):
        return len(deploy_all())


def up(
    prefect_port: Annotated[int, typer.Option(help="the Prefect server and UI")] = 4200,
    host: Annotated[str | None, typer.Option(help="default: the setting (127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="the API; default: the setting (8765)")] = None,
    mcp_port: Annotated[int | None, typer.Option(help="MCP over HTTP; default 8766")] = None,
    worker: Annotated[bool, typer.Option(help="run a process worker")] = True,
    start_timeout: Annotated[float, typer.Option(help="seconds for each service")] = 120.0,
) -> None:
    """Run Hindsight as a service: the Prefect server and UI, the scheduled deployments and a
    worker, the read API and the MCP server over HTTP. Ctrl-C stops everything."""
    from memory_cli.processes import Services, StartFailed

    with fail_on_errors():
        settings, _ = load()  # migrates the schema once, before any service reads it
        host = host or settings.serve.host
        api_port = port if port is not None else settings.serve.port
        mcp = mcp_port if mcp_port is not None else settings.serve.mcp_port
        prefect_url = f"http://{host}:{prefect_port}"
        env = child_env(settings, f"{prefect_url}/api")
        logs = settings.data_dir.resolve() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
        services = Services(env=env, logs=logs)
        with _stop_signals() as stop:
            try:
                ports = (prefect_port, api_port, mcp)
                _start_all(services, settings, host, ports, worker, stop, start_timeout)
                if not stop:
                    _show(services, prefect_url, host, api_port, mcp, settings)
                while not stop:
                    dead = services.exited()
                    if dead is not None:
                        raise StartFailed(
                            f"{dead.name} exited ({dead.proc.returncode}); see {dead.log}"
                        )
                    time.sleep(0.5)
                err_console.print("stopping ...")
            finally:
                services.stop()
        console.print("all services stopped")


def _start_all(
    services: Services,
    settings: Settings,
    host: str,
    ports: tuple[int, int, int],
    worker: bool,
    stop: list[int],
    timeout_s: float,
) -> None:
    from memory_cli.processes import wait_http

    prefect_port, api_port, mcp_port = ports
    prefect_url = f"http://{host}:{prefect_port}"
    server = services.start(
        "prefect-server",
        [_bin("prefect"), "server", "start", "--host", host, "--port", str(prefect_port)],
    )
    api = services.start(
        "api", [_bin("hindsight"), "serve", "--host", host, "--port", str(api_port)]
    )
    mcp = services.start(
        "mcp", [_bin("hindsight"), "mcp", "--http", "--host", host, "--port", str(mcp_port)]
    )
    with console.status("starting the Prefect server ..."):
        took = wait_http(f"{prefect_url}/api/health", timeout_s=timeout_s, child=server, stop=stop)
    console.print(f"Prefect server up in {took:.1f} s")
    if stop:
        return
    with console.status("deploying the flows ..."):
        n = deploy_quietly(f"{prefect_url}/api")
    from flows.settings import FlowSettings

    o = FlowSettings()
    console.print(
        f"{n} deployments on work pool hindsight-process; nightly at "
        f"'{o.nightly_cron}' ({o.nightly_timezone})"
    )
    if worker and not stop:
        from flows.deployments import WORK_POOL

        services.start(
            "worker",
            [_bin("prefect"), "worker", "start", "--pool", WORK_POOL, "--type", "process"],
        )
    wait_http(f"http://{host}:{api_port}/healthz", timeout_s=timeout_s, child=api, stop=stop)
    # the MCP endpoint answers only MCP requests: a 4xx on GET means it listens
    mcp_url = f"http://{host}:{mcp_port}/mcp"
    wait_http(mcp_url, timeout_s=timeout_s, child=mcp, stop=stop, any_status=True)


def _show(
    services: Services, prefect_url: str, host: str, api_port: int, mcp_port: int, s: Settings
) -> None:
    urls = {
        "prefect-server": f"{prefect_url} (UI), {prefect_url}/api",
        "worker": "pool hindsight-process",
        "api": f"http://{host}:{api_port} (docs: /docs, metrics: /metrics)",
        "mcp": f"http://{host}:{mcp_port}/mcp",
    }
    rows = [[c.name, str(c.proc.pid), urls.get(c.name, ""), str(c.log)] for c in services.children]
    table("hindsight up", ["service", "pid", "where", "log"], rows)
    console.print(f"data: {s.data_dir.resolve()}  -  Ctrl-C stops everything")


def deploy() -> None:
    """Create the work pool and every deployment on the Prefect API in $PREFECT_API_URL (the
    nightly one on HINDSIGHT_NIGHTLY_CRON); safe to repeat."""
    from memory_cli.processes import StartFailed

    with fail_on_errors():
        from prefect.settings import PREFECT_API_URL

        from flows.deployments import SPECS, WORK_POOL, deploy_all
        from flows.settings import FlowSettings

        o = FlowSettings()

        if not PREFECT_API_URL.value():
            raise StartFailed("set PREFECT_API_URL to the Prefect server (http://host:4200/api)")
        with contextlib.redirect_stdout(io.StringIO()):
            deploy_all(o)
        rows = [
            [
                f"{s.name}/{s.name}",
                WORK_POOL,
                f"{o.nightly_cron} {o.nightly_timezone}" if s.nightly_schedule else "",
                ",".join(s.tags),
            ]
            for s in SPECS
        ]
        table("deployments", ["deployment", "work pool", "schedule", "tags"], rows)
