"""docker-compose.yml, the Dockerfile and prefect.yaml, checked statically (no Docker here)."""

from __future__ import annotations

import importlib
import re

import yaml
from prefect import Flow
from prefect.client.schemas.schedules import CronSchedule

from flows.settings import FlowSettings
from flows.settings_doc import rows
from tests.helpers.data import REPO


def _setting_names() -> set[str]:
    return {r[0].strip("`") for r in rows()}  # every setting, as docs/settings.md lists it


def test_compose_services_health_volumes_and_settings() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "qdrant", "prefect-server", "setup", "worker", "api", "mcp"} <= set(
        services
    )
    # one-shot services (the setup: migrate, deploy) end; the others say when they are healthy
    once = {name for name, svc in services.items() if svc.get("restart") == "no"}
    assert once == {"setup"}
    for name, svc in services.items():
        assert name in once or svc["healthcheck"]["test"], name
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            wanted = "service_completed_successfully" if dep in once else "service_healthy"
            assert dep in services and cond["condition"] == wanted, (name, dep)
        for vol in svc.get("volumes", []):
            source = vol.split(":", 1)[0]
            if not source.startswith("."):
                assert source in compose["volumes"], (name, source)
        env = svc.get("environment") or {}
        for key, value in env.items():
            if key.startswith("HINDSIGHT_"):
                assert key in _setting_names(), f"{name}: {key} is not a setting"
            if "PASSWORD" in key or "password" in str(value).split("@")[0]:
                assert "${" in str(value), f"{name}: {key} has a literal secret"
    assert services["worker"]["build"] == "."
    # state lives in named volumes (the Prefect server's in PostgreSQL)
    assert "postgres-data:/var/lib/postgresql/data" in services["postgres"]["volumes"]
    assert "qdrant-data:/qdrant/storage" in services["qdrant"]["volumes"]
    assert set(compose["volumes"]) >= {"postgres-data", "qdrant-data", "hindsight-data"}


def test_compose_runs_what_the_code_expects() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")
    assert "prefect server start" in services["prefect-server"]["command"]
    prefect_db = services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert prefect_db.startswith("postgresql+asyncpg://") and "@postgres:" in prefect_db
    assert services["api"]["command"][0] == "serve"
    assert services["mcp"]["command"][:2] == ["mcp", "--http"]
    setup = " ".join(services["setup"]["command"])
    assert "hindsight db upgrade" in setup and "hindsight deploy" in setup
    worker = " ".join(services["worker"]["command"])
    assert "--pool hindsight-process" in worker and "db upgrade" not in worker
    # several workers split the backlog (memory_core.leases, claims); one migrator before them
    assert services["worker"]["deploy"]["replicas"] == "${HINDSIGHT_WORKERS:-3}"
    for name in ("worker", "api", "mcp"):
        assert "setup" in services[name]["depends_on"], name
    for name in ("setup", "worker", "api", "mcp"):
        env = services[name]["environment"]
        assert env["HINDSIGHT_DATABASE_URL"].startswith("postgresql://")
        assert env["HINDSIGHT_QDRANT__URL"] == "http://qdrant:6333"
        assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
        for ef in services[name].get("env_file", []):
            assert ef["required"] is False  # optional: the stack starts without an LLM


def _interpolated(value: str) -> str:
    """A compose value as the container sees it: ${X:-default} gives the default."""
    value = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{\w+:\?[^}]*\}", "secret", value)


def test_compose_settings_parse_as_the_containers_read_them(monkeypatch) -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    for name in ("worker", "api", "mcp"):
        for key, value in compose["services"][name]["environment"].items():
            if key.startswith("HINDSIGHT_"):
                monkeypatch.setenv(key, _interpolated(str(value)))
        settings = FlowSettings()  # raises on a value pydantic cannot read
        assert settings.qdrant.url == "http://qdrant:6333", name
        assert settings.nightly_cron == "0 2 * * *"
        if name == "mcp":
            assert "mcp:*" in settings.serve.allowed_hosts


def test_dockerfile_extras_exist() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("ARG EXTRAS="):
            for extra in line.split("=", 1)[1].split(","):
                assert extra in extras, extra


def test_dockerfile_copies_what_exists() -> None:
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (REPO / src).exists(), src


def test_prefect_yaml_deployments_point_at_flows() -> None:
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    names = {d["name"] for d in spec["deployments"]}
    assert {"nightly", "retrospect"} <= names
    for dep in spec["deployments"]:
        path, func = dep["entrypoint"].split(":")
        module = importlib.import_module(re.sub(r"\.py$", "", path).replace("/", "."))
        assert isinstance(getattr(module, func), Flow), dep["entrypoint"]
        assert dep["work_pool"]["name"] == "hindsight-process"
        for sched in dep.get("schedules", []):
            CronSchedule(cron=sched["cron"], timezone=sched["timezone"])


def test_prefect_yaml_matches_the_python_deployments() -> None:
    """`prefect deploy --all` and `hindsight deploy` create the same deployments."""
    from flows.deployments import SPECS, WORK_POOL

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    by_name = {d["name"]: d for d in spec["deployments"]}
    assert set(by_name) == {s.name for s in SPECS}
    for s in SPECS:
        d = by_name[s.name]
        module, func = s.flow.split(":")
        assert d["entrypoint"] == f"{module.replace('.', '/')}.py:{func}"
        assert (d["description"], d["tags"], d["parameters"]) == (
            s.description,
            s.tags,
            s.parameters,
        ), s.name
        assert d.get("concurrency_limit") == s.concurrency_limit, s.name
        assert d["work_pool"]["name"] == WORK_POOL
        assert bool(d.get("schedules")) == s.nightly_schedule, s.name
    (nightly,) = by_name["nightly"]["schedules"]
    default = FlowSettings()
    assert (nightly["cron"], nightly["timezone"]) == (
        FlowSettings.model_fields["nightly_cron"].default,
        FlowSettings.model_fields["nightly_timezone"].default,
    )
    assert default.nightly_cron == "0 2 * * *"  # 02:00 UTC unless HINDSIGHT_NIGHTLY_CRON says


def test_every_flow_has_a_deployment_with_valid_parameters() -> None:
    from flows.deployments import SPECS, flow_of

    deployed = {flow_of(s).name for s in SPECS}
    for path in sorted((REPO / "flows").glob("*.py")):
        module = importlib.import_module(f"flows.{path.stem}")
        for obj in vars(module).values():
            if isinstance(obj, Flow) and obj.__module__ == module.__name__:
                assert obj.name in deployed, f"flow {obj.name} has no deployment"
    for s in SPECS:  # the default parameters validate against the flow's parameter model
        flow_of(s).validate_parameters(s.parameters)


def test_dead_letter_alert_is_a_valid_automation() -> None:
    import uuid

    from prefect.events.schemas.automations import AutomationCore

    text = (REPO / "deploy" / "dead-letter-alert.yaml").read_text()
    automation = AutomationCore.model_validate(
        yaml.safe_load(text.replace("<BLOCK_ID>", str(uuid.uuid4())))
    )
    assert automation.trigger.expect == {"prefect.task-run.Failed"}  # type: ignore[union-attr]
