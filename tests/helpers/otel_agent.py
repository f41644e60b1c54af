"""A deploy agent instrumented with OpenTelemetry only (GenAI semantic conventions): it knows
nothing of Hindsight; its spans go wherever the exporter it is given sends them."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Status, StatusCode

SERVICES = ["billing-api", "search-api", "auth-gateway"]


class RegistryError(Exception):
    """The registry refused a push."""


def _tool(
    tracer: Any, name: str, args: dict[str, Any], result: Any = None, error: str = ""
) -> None:
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(args),
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if error:
            exc = RegistryError(error)
            span.record_exception(exc)
            span.set_attribute("error.type", "RegistryError")
            span.set_status(Status(StatusCode.ERROR, error))
        else:
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def run_deploys(exporter: SpanExporter, services: list[str] = SERVICES) -> None:
    """One traced deploy per service: the registry answers 429 once, the agent waits and
    pushes again. Every span is exported as it ends (children before their root)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "release-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("deploy-agent")
    for service in services:
        image = f"registry.local/{service}:2.0.0"
        with tracer.start_as_current_span(
            "invoke_agent release-bot",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "release-bot",
                "hindsight.task_type": "deploy_service",
            },
        ) as root:
            with tracer.start_as_current_span(
                "chat gpt-4o",
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
            ):
                pass
            with tracer.start_as_current_span("load config"):  # not a GenAI span: context
                pass
            _tool(tracer, "build_image", {"service": service, "tag": "2.0.0"}, {"image": image})
            _tool(
                tracer,
                "push_image",
                {"image": image},
                error="HTTP 429 Too Many Requests: registry rate limit, retry after 30s",
            )
            _tool(tracer, "wait", {"seconds": 30}, "waited 30s")
            _tool(tracer, "push_image", {"image": image}, {"digest": "sha256:0abc0"})
            _tool(tracer, "deploy", {"service": service, "image": image}, {"status": "rolling out"})
            root.set_status(Status(StatusCode.OK))
    provider.shutdown()
