"""The LLM Protocol and the OpenAI-compatible implementation (OpenAI, vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from memory_core.errors import LLMRefused, LLMTransient
from memory_core.redact import redact

if TYPE_CHECKING:
    import openai

StructuredMode = Literal["auto", "json_schema", "json_object"]


@dataclass(frozen=True)
class LLMReply:
    """The raw text of one answer and what it cost."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int


class LLMClient(Protocol):
    """Chat completion that asks for JSON of a given shape."""

    model: str

    def complete(self, *, messages: list[dict[str, str]], schema: type[BaseModel]) -> LLMReply:
        """One call; raises LLMTransient (retry later) or LLMRefused (do not)."""
        ...


class OpenAICompatibleLLM:
    """Any server that speaks the OpenAI chat API, through the `openai` package.

    Structured output: JSON schema where the server takes it; otherwise JSON mode with the
    schema attached (llama.cpp) or plain JSON mode, validated against the schema afterwards.
    The mode that worked is remembered. Retries are the caller's (Prefect's) job.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float = 60.0,
        structured: StructuredMode = "auto",
        max_tokens: int = 2048,
        gate: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.model = model
        self._gate = gate or nullcontext  # e.g. a global concurrency limit on calls
        self.max_tokens = max_tokens
        # imported here: every command that merely can call an LLM imports this module, and
        # `openai` alone takes most of a second to import
        import openai

        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
        )
        self._modes: list[str] = (
            ["json_schema", "json_object+schema", "json_object"]
            if structured == "auto"
            else [structured]
        )
        self._lock = threading.Lock()

    def complete(self, *, messages: list[dict[str, str]], schema: type[BaseModel]) -> LLMReply:
        """One chat completion asking for JSON shaped like `schema`."""
        import openai  # imported by __init__ already

        while True:
            mode = self._modes[0]
            response_format = _response_format(mode, schema)  # before taking a call slot
            try:
                with self._gate():
                    resp = self._client.chat.completions.create(  # type: ignore[call-overload]
                        model=self.model,
                        messages=messages,
                        response_format=response_format,
                        temperature=0.0,
                        max_tokens=self.max_tokens,
                    )
                break
            except openai.APIStatusError as exc:
                # servers refuse an unknown response_format with 400, or (llama.cpp) with 500
                if len(self._modes) > 1 and _about_response_format(exc):
                    with self._lock:  # this server does not take that format: try the next
                        if self._modes[0] == mode and len(self._modes) > 1:
                            self._modes.pop(0)
                    continue
                if exc.status_code == 429 or exc.status_code >= 500:
                    raise LLMTransient(f"{self.model}: {exc.status_code} {_message(exc)}") from exc
                raise LLMRefused(f"{self.model}: {exc.status_code} {_message(exc)}") from exc
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                why = redact(str(exc))
                raise LLMTransient(f"{self.model}: {type(exc).__name__}: {why}") from exc
        choice = resp.choices[0] if resp.choices else None
        text = (choice.message.content if choice else None) or ""
        usage = resp.usage
        return LLMReply(
            text=text,
            model=resp.model or self.model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )


@lru_cache(maxsize=64)
def _response_format(mode: str, schema: type[BaseModel]) -> dict[str, Any]:
    # pydantic builds the JSON schema anew on every call: once per (mode, schema) is enough
    body = schema.model_json_schema()
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": body, "strict": False},
        }
    if mode == "json_object+schema":
        return {"type": "json_object", "schema": body}
    return {"type": "json_object"}


def _message(exc: openai.APIStatusError) -> str:
    # redacted, then cut: the error goes into run states, dead letters and the Prefect UI, and
    # a server (or a proxy) may quote the key or the request it refused
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return redact(str(err.get("message", json.dumps(err))))[:300]
        return redact(str(err))[:300]
    return redact(str(exc))[:300]


def _about_response_format(exc: openai.APIStatusError) -> bool:
    text = _message(exc).lower()
    if exc.status_code not in (400, 422, 500):
        return False
    return any(k in text for k in ("response_format", "json_schema", "json_object"))
