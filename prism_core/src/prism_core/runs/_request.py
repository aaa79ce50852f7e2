"""Before a provider turn: which provider answers, and the request it is sent.

Owns provider resolution, the system prompt with its skills section, the tool specs, request
policies and ``provider_request`` middleware, redaction of what they add, and the request-size
limit. It must not call the provider or write to the session.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import attrs

from ..codec import dumps
from ..content import ErrorInfo, Message, message_size_bound
from ..providers import AIProvider, ProviderOutputSpec, ProviderRequest, ProviderToolSpec
from ..redaction import redact_value
from ..skills import render_skill_parts
from ._attention import compile_attention
from ._failures import RunFailure
from ._fold import fold_tool_results
from ._state import RunState

__all__ = ("assemble_request", "request_bytes", "resolve_provider")


async def resolve_provider(run: RunState) -> AIProvider:
    """The agent's provider, else the provider source's, else a plugin's; fail when none."""
    agent = run.agent
    provider: Any = agent.provider
    if provider is None and run.plan.provider_source is not None:
        provider = run.plan.provider_source(run.plan.model)
        if inspect.isawaitable(provider):
            provider = await provider
    if provider is None:
        provider = agent.plugin_host.provider(run.plan.model)
    if provider is None:
        raise RunFailure(
            ErrorInfo(
                f"No provider for model {run.plan.model.provider}/{run.plan.model.model}: pass "
                "create_agent(provider=...), a provider_source, or a plugin implementing "
                "prism_provider",
                code="ERR_PRISM_PROVIDER_NOT_FOUND",
            )
        )
    if not callable(getattr(provider, "generate", None)):
        raise RunFailure(
            ErrorInfo(
                f"Provider for {run.plan.model.provider!r} has no generate(request) method",
                code="ERR_PRISM_PROVIDER_INVALID",
            )
        )
    return provider  # type: ignore[no-any-return]


def _system_prompt(run: RunState) -> str | None:
    """The system prompt with its skills section. ``cache_aware``: what stays the same across
    turns and runs first (the agent's prompt, the skill catalogue), then what changes (the
    run's own layers, skill bodies loaded as the run goes); ``legacy``: the prompt with the
    run's layers, then the whole skills section."""
    loaded = run.session.loaded_skills
    key = loaded.names()
    if run.system_key != key:
        catalogue, bodies = render_skill_parts(
            run.plan.active_skills, loaded, run.plan.skills_disclosure
        )
        agent_part, run_part = run.plan.system_parts
        ordered: tuple[str | None, ...]
        if run.plan.input_layout == "legacy":
            section = "\n\n".join(p for p in (catalogue, bodies) if p) or None
            ordered = (agent_part, run_part, section)
        else:
            ordered = (agent_part, catalogue, run_part, bodies)
        parts = [p for p in ordered if p]
        run.system_text = "\n\n".join(parts) if parts else None
        run.system_key = key
    return run.system_text


def _tool_specs(run: RunState) -> tuple[ProviderToolSpec, ...]:
    if run.tool_specs is None:
        allowed = None if run.plan.tool_names is None else set(run.plan.tool_names)
        run.tool_specs = tuple(
            ProviderToolSpec(tool.name, tool.description, tool.parameters)
            for tool in run.agent.registry.definitions()
            if allowed is None or tool.name in allowed
        )
    return run.tool_specs


def _output_spec(run: RunState) -> ProviderOutputSpec | None:
    output = run.plan.output_type
    return ProviderOutputSpec(output.name, output.schema) if output is not None else None


async def assemble_request(run: RunState) -> ProviderRequest:
    """The next provider request: policies, history, tools, system prompt, middleware."""
    options: dict[str, Any] = dict(run.plan.provider_options)
    for policy in run.plan.policies:
        patch = policy(
            ProviderRequest(
                model=run.plan.model,
                messages=(),
                system=run.plan.system,
                options=dict(options),
                metadata=run.plan.metadata,
                signal=run.signal,
            )
        )
        if inspect.isawaitable(patch):
            patch = await patch
        if patch is None:
            continue
        if not isinstance(patch, Mapping):
            raise RunFailure(
                ErrorInfo(
                    "provider request policies must return None or a mapping with "
                    "'options' and/or 'secrets'",
                    code="ERR_PRISM_PROVIDER_POLICY",
                )
            )
        options.update(dict(patch.get("options") or {}))
        run.secrets.extend(s for s in patch.get("secrets") or () if isinstance(s, str))
    if run.plan.thinking_level is not None:
        options["thinking_level"] = run.plan.thinking_level
    options.setdefault("session_id", run.session_id)
    options.setdefault("cache_key", run.session_id)
    history = tuple(run.session.transcript.messages)
    tools = _tool_specs(run)
    system = _system_prompt(run)
    messages = await _provider_messages(run, history, system, tools)
    request = ProviderRequest(
        model=run.plan.model,
        messages=messages,
        tools=tools,
        system=system,
        options=options,
        metadata=run.plan.metadata,
        signal=run.signal,
        output=_output_spec(run),
    )
    before = request
    request = await run.agent.middleware.run(
        "provider_request", request, run.mw_context("provider_request")
    )
    if request is not before or run.plan.redactor is not None:
        # History is redacted as it is appended; only the new parts need a pass.
        request = attrs.evolve(
            request,
            system=redact_value(request.system, run.plan.redactor),
            options=redact_value(dict(request.options), run.plan.redactor),
            messages=request.messages
            if request.messages is before.messages
            else redact_value(request.messages, run.plan.redactor),
        )
    measured: dict[str, Any] = {
        "system": request.system,
        "tools": [attrs.asdict(t) for t in request.tools],
        "options": dict(request.options),
    }
    if request.output is not None:
        measured["output"] = attrs.asdict(request.output)
    extra = len(dumps(measured))
    run.request_extra_bytes = extra
    run.request_messages = None if request.messages is history else request.messages
    # The cheap bound settles almost every turn; the exact size is measured only near the
    # limit, so a long history is not re-encoded before each provider call.
    if _request_bound(run) > run.plan.limits.max_request_bytes:
        run.counters.charge("max_request_bytes", request_bytes(run), run.plan.limits)
    return request


async def _provider_messages(
    run: RunState,
    history: tuple[Message, ...],
    system: str | None,
    tools: tuple[ProviderToolSpec, ...],
) -> tuple[Message, ...]:
    """The history as this turn's provider sees it: aged large tool results folded
    (``tool_result_fold``), then the attention compiler's stubs; the transcript is unchanged."""
    messages = history
    if run.plan.tool_result_fold is not None:
        messages = await fold_tool_results(
            messages, run.plan.tool_result_fold, run.fold_summaries, run.agent.thread_limiter
        )
    if run.plan.attention is not None:
        extra = len(dumps({"system": system, "tools": [attrs.asdict(t) for t in tools]}))
        messages, event = compile_attention(
            messages,
            extra,
            run.plan.attention,
            run.session.attention_frontier,
            session_id=run.session_id,
            run_id=run.run_id,
        )
        if event is not None:
            run.deferred.append(run.emit(event))
    return messages


def _request_bound(run: RunState) -> int:
    messages = run.request_messages
    history = (
        run.session.transcript.size_bound()
        if messages is None
        else sum(message_size_bound(m) for m in messages)
    )
    return history + run.request_extra_bytes


def request_bytes(run: RunState) -> int:
    """The exact canonical-JSON size of the last request (measured on demand)."""
    messages = run.request_messages
    history = (
        run.session.transcript.size_bytes() if messages is None else len(dumps(list(messages)))
    )
    return history + run.request_extra_bytes
