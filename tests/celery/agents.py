"""The host side of the Celery tests: scripted agents and an effect log keyed on the
idempotency key, as a payment system would key its charges.

``charger`` runs ``TURNS`` provider turns, each calling the side-effecting ``charge`` tool
once; ``deployer`` calls ``deploy``, which a guardrail holds for approval. The provider is
scripted by history (the number of assistant messages sent), so a continued run picks up at
the right turn with a fresh provider object. Configuration comes from the environment, so
the test process and the worker processes it starts build the same agents.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio

from prism_core import (
    RECONCILE_NOT_STARTED,
    Guardrail,
    ProviderRequest,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

REVISION = "celery-test-1"


def turns() -> int:
    """Tool turns per ``charger`` run."""
    return int(os.environ.get("PRISM_CELERY_TEST_TURNS", "3"))


def think_seconds() -> float:
    """How long the scripted model 'thinks' each turn (when the tests kill workers)."""
    return float(os.environ.get("PRISM_CELERY_TEST_THINK", "0.05"))


class EffectLog:
    """One JSON line per applied effect: the idempotency key, the call, the worker's pid."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def entries(self) -> list[dict[str, Any]]:
        """Every applied effect, in order (a line cut by a kill is not an effect)."""
        if not self.path.exists():
            return []
        return [
            json.loads(line)
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.endswith("}")
        ]

    def applied(self, key: str) -> dict[str, Any] | None:
        """The effect applied under ``key``, if any."""
        return next((e for e in self.entries() if e["key"] == key), None)

    def apply(self, key: str, run_id: str, call: str, value: Any) -> None:
        """Apply an effect: one line, flushed and synced before the tool returns."""
        line = {
            "key": key,
            "run": run_id,
            "call": call,
            "value": value,
            "pid": os.getpid(),
            "time": time.time(),
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def _log() -> EffectLog:
    return EffectLog(os.environ["PRISM_CELERY_TEST_EFFECTS"])


class ScriptedModel:
    """Tool call after tool call, then the answer; each turn after ``think_seconds``."""

    id = "mock"

    def __init__(self, tool: str, count: int) -> None:
        self.tool = tool
        self.count = count

    async def generate(self, request: ProviderRequest) -> Any:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        await anyio.sleep(think_seconds())
        if turn < self.count:
            call = tool_call_content(f"call_{turn}", self.tool, {"step": turn})
            yield provider_tool_call(call)
        else:
            yield provider_text_delta(f"done after {self.count} {self.tool} calls")
        yield provider_done()


def _charge(args: dict[str, Any], context: Any) -> Any:
    value = {"charged": args["step"]}
    _log().apply(context.idempotency_key, context.run_id, context.tool_call_id, value)
    time.sleep(float(os.environ.get("PRISM_CELERY_TEST_WORK", "0.02")))
    return value


def _reconcile(call: Any, context: Any) -> Any:
    # Asked after a crash left the call in doubt: the log says whether the effect happened.
    earlier = _log().applied(context.idempotency_key)
    return earlier["value"] if earlier is not None else RECONCILE_NOT_STARTED


def _ask_before_deploy(context: Any) -> dict[str, str]:
    if context.tool_name == "deploy":
        return {"action": "interrupt", "reason": "a deploy needs approval"}
    return {"action": "allow"}


def charger(**config: Any) -> Any:
    """The crash-tested agent: ``turns()`` charges, each reconciled from the effect log
    (``config`` adds agent configuration, such as ``run_state``)."""
    return create_agent(
        id="charger",
        model={"provider": "mock", "model": "scripted"},
        provider=ScriptedModel("charge", turns()),
        tools=[ToolDefinition("charge", _charge, effect="write", reconcile=_reconcile)],
        **config,
    )


def deployer() -> Any:
    """An agent whose one deploy waits for a person's approval."""
    return create_agent(
        id="deployer",
        model={"provider": "mock", "model": "scripted"},
        provider=ScriptedModel("deploy", 1),
        tools=[ToolDefinition("deploy", _charge, effect="write", reconcile=_reconcile)],
        guardrails={"tool_input": [Guardrail("ask-deploy", "tool_input", _ask_before_deploy)]},
    )


def releaser() -> Any:
    """An agent whose one release needs a person's approval within a millisecond (so any
    sweep after it finds the decision expired)."""
    return create_agent(
        id="releaser",
        model={"provider": "mock", "model": "scripted"},
        provider=ScriptedModel("release", 1),
        tools=[
            ToolDefinition(
                "release", _charge, effect="write", needs_approval=True, approval_timeout_ms=1
            )
        ],
    )


def resolve_agent(agent_id: str) -> tuple[Any, str]:
    """The host's registry: a fresh agent for each id, with its revision."""
    build = {"charger": charger, "deployer": deployer, "releaser": releaser}.get(agent_id)
    return (build(), REVISION) if build is not None else (None, REVISION)
