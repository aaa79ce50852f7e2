"""Run options: validated once, before any provider work.

It must not touch a session, a store or a provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._output_type import OutputType, coerce_output_type
from .._principal import InvalidPrincipalError, check_actor
from ..errors import JsonSchemaError, PrismError
from ..models import ModelConfig, coerce_model
from ._fold import coerce_tool_result_fold
from ._turn_policy import coerce_stop_hooks, coerce_turn_policy

__all__ = (
    "INPUT_LAYOUTS",
    "RUN_OPTION_KEYS",
    "InvalidOptionsError",
    "RunOptions",
    "check_input_layout",
    "coerce_run_options",
)

RUN_OPTION_KEYS = (
    "tool_names",
    "limits",
    "model",
    "system_prompt",
    "retry",
    "compaction",
    "metadata",
    "guardrails",
    "loop",
    "run_state",
    "redactor",
    "thinking_level",
    "provider_options",
    "provider_source",
    "provider_request_policies",
    "active_skills",
    "skills",
    "activate_all_skills",
    "skills_disclosure",
    "turn_policy",
    "stop_hooks",
    "output_type",
    "signal",
    "input_layout",
    "tool_result_fold",
    "attention_compiler",
    "actor",
)

#: The request layouts: ``cache_aware`` puts what is stable across turns (the system prompt,
#: the skill catalogue) before what changes (a run's own prompt layers, loaded skill bodies).
INPUT_LAYOUTS = ("cache_aware", "legacy")


def check_input_layout(value: Any) -> None:
    """Refuse an ``input_layout`` that is not ``"cache_aware"`` or ``"legacy"``."""
    if value not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout must be 'cache_aware' or 'legacy', got {value!r}")


class InvalidOptionsError(PrismError, ValueError):
    """An option value is malformed; raised before any provider work."""

    code = "ERR_PRISM_INVALID_OPTIONS"


@attrs.frozen(kw_only=True)
class RunOptions:
    """The per-run options of ``session.run(input, **options)``, validated."""

    tool_names: tuple[str, ...] | None = None
    limits: Any = None
    model: ModelConfig | None = None
    system_prompt: Any = None
    retry: Any = None
    compaction: Any = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    guardrails: Any = None
    loop: Any = None
    run_state: Any = None
    redactor: Any = None
    thinking_level: str | None = None
    provider_options: Mapping[str, Any] = attrs.field(factory=dict)
    provider_source: Any = None
    provider_request_policies: tuple[Any, ...] = ()
    active_skills: tuple[str, ...] | None = None
    skills: Any = None
    activate_all_skills: bool | None = None
    skills_disclosure: str | None = None
    turn_policy: Any = None
    stop_hooks: Any = None
    #: The run's ``output_type`` (an ``OutputType``), replacing the agent's.
    output_type: OutputType | None = None
    #: The host's :class:`~prism_core.AbortSignal`: firing it aborts the run as
    #: ``session.abort()`` does (already fired: the run ends ``aborted`` before any request).
    signal: Any = None
    #: ``"cache_aware"`` or ``"legacy"`` for this run (wins over the agent's).
    input_layout: str | None = None
    #: This run's ``tool_result_fold`` (a ``ToolResultFold``), ``False`` to turn it off.
    tool_result_fold: Any = None
    #: ``False`` (off for this run) or a mapping relaxing the agent's attention compiler.
    attention_compiler: Any = None
    #: Who starts the run (at most 256 UTF-8 bytes): ``AgentRunSummary.started_by`` and
    #: ``ToolExecutionContext.started_by``.
    actor: str | None = None


def _names(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidOptionsError(f"{key} must be a sequence of tool names, got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidOptionsError(f"{key} entries must be non-empty strings, got {name!r}")
    return names


def coerce_run_options(options: Mapping[str, Any]) -> RunOptions:
    """Validate ``options`` (the keyword arguments of ``run``) into :class:`RunOptions`."""
    unknown = sorted(set(options) - set(RUN_OPTION_KEYS))
    if unknown:
        raise InvalidOptionsError(
            f"unknown run options {unknown}; known options: {sorted(RUN_OPTION_KEYS)}"
        )
    data = dict(options)
    if data.get("tool_names") is not None:
        data["tool_names"] = _names(data["tool_names"], "tool_names")
    if data.get("active_skills") is not None:
        data["active_skills"] = _names(data["active_skills"], "active_skills")
    if data.get("model") is not None:
        try:
            data["model"] = coerce_model(data["model"], where="run option model")
        except TypeError as exc:
            raise InvalidOptionsError(str(exc)) from exc
    for key in ("metadata", "provider_options"):
        value = data.get(key)
        if value is None:
            data.pop(key, None)
        elif not isinstance(value, Mapping):
            raise InvalidOptionsError(f"{key} must be a mapping, got {type(value).__name__}")
        else:
            data[key] = dict(value)
    level = data.get("thinking_level")
    if level is not None and not isinstance(level, str):
        raise InvalidOptionsError("thinking_level must be a string")
    policies = data.get("provider_request_policies")
    if policies is not None:
        if not isinstance(policies, Sequence) or not all(callable(p) for p in policies):
            raise InvalidOptionsError("provider_request_policies must be a sequence of callables")
        data["provider_request_policies"] = tuple(policies)
    else:
        data.pop("provider_request_policies", None)
    source = data.get("provider_source")
    if source is not None and not callable(source):
        raise InvalidOptionsError("provider_source must be callable(model) -> provider | None")
    disclosure = data.get("skills_disclosure")
    if disclosure is not None and disclosure not in ("progressive", "eager"):
        raise InvalidOptionsError("skills_disclosure must be 'progressive' or 'eager'")
    signal = data.get("signal")
    if signal is not None and (
        not hasattr(signal, "aborted") or not callable(getattr(signal, "on_abort", None))
    ):
        raise InvalidOptionsError(
            "signal must be an AbortSignal (aborted, reason, on_abort), got "
            f"{type(signal).__name__}"
        )
    try:
        check_actor(data.get("actor"), where="run option actor")
    except InvalidPrincipalError as exc:
        raise InvalidOptionsError(exc.message) from exc
    try:
        data["output_type"] = coerce_output_type(data.get("output_type"))
    except (TypeError, JsonSchemaError) as exc:
        raise InvalidOptionsError(str(exc)) from exc
    try:
        if data.get("input_layout") is not None:
            check_input_layout(data["input_layout"])
        data["tool_result_fold"] = coerce_tool_result_fold(
            data.get("tool_result_fold"), for_run=True
        )
        data["turn_policy"] = coerce_turn_policy(data.get("turn_policy"))
        if data.get("stop_hooks") is not None:
            data["stop_hooks"] = coerce_stop_hooks(data["stop_hooks"])
    except (TypeError, ValueError) as exc:
        raise InvalidOptionsError(str(exc)) from exc
    return RunOptions(**data)
