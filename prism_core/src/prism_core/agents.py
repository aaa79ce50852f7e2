"""``create_agent``: explicit composition of a model, a provider, tools and policies."""

from __future__ import annotations

import asyncio
import copy
import functools
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, ParamSpec, TypeVar, overload

import anyio
import attrs

from ._agent_config import AgentConfig
from ._echo import clip
from ._output_type import OutputType, coerce_output_type
from .durable._hosting import hosted_run_state
from .durable._options import RunStateOptions, coerce_run_state_options
from .errors import AgentConfigError, PrismError
from .guardrails import (
    GuardrailConfig,
    GuardrailPack,
    coerce_guardrails,
    compile_guardrail_packs,
    pack_catalogue,
)
from .limits import RunLimits, coerce_limits
from .middleware import MiddlewareChain
from .models import ModelConfig, coerce_model
from .plugins import PluginHost
from .providers import AIProvider, ProviderResolver
from .records._memory import create_memory_session_store
from .records._store import SessionStore
from .redaction import Redactor
from .results import AgentRunResult
from .resume._child_runs import CHILD_INPUT_SCHEMA, SubAgentTool
from .retry import RetryConfig, coerce_retry
from .runs._attention import coerce_attention_compiler
from .runs._compaction import coerce_compaction
from .runs._fold import coerce_tool_result_fold
from .runs._loops import SingleShotLoop, coerce_loop
from .runs._options import check_input_layout
from .runs._turn_policy import check_turn_policy_limits, coerce_stop_hooks, coerce_turn_policy
from .sessions._session import DEFAULT_SNAPSHOT_CACHE_TTL_MS, AgentSession
from .skills import Skill, SkillRegistry
from .tools import ToolDefinition, ToolPolicy, ToolRegistry, ToolValidator, create_tool_registry

__all__ = ("Agent", "create_agent", "create_agent_session", "create_secure_agent")

P = ParamSpec("P")
T = TypeVar("T")

#: How much of a refused value's description an :class:`AgentConfigError` quotes.
_CONFIG_MESSAGE_LIMIT = 300


def _typed_config(init: Callable[P, None]) -> Callable[P, None]:
    """Make every refusal of ``Agent(...)`` typed: a plain ``TypeError``/``ValueError`` from a
    check (or from Python itself, for an unknown keyword) becomes :class:`AgentConfigError`
    with the original as its ``__cause__``; Prism's own errors pass through."""

    @functools.wraps(init)
    def checked(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            init(*args, **kwargs)
        except PrismError:
            raise
        except (TypeError, ValueError) as exc:
            raise AgentConfigError(clip(str(exc), _CONFIG_MESSAGE_LIMIT)) from exc

    return checked


def _check_session_store(store: Any) -> SessionStore:
    if isinstance(store, str):
        raise PrismError(
            "store must be a SessionStore, not a URL: open it with "
            "store=open_session_store(url, plugins=[...]) (the plugin that serves its scheme)",
            code="ERR_PRISM_STORE_INVALID",
        )
    if not isinstance(store, SessionStore):
        raise PrismError(
            f"store must be a SessionStore (append/list/read_branch_path/...), got "
            f"{type(store).__name__}",
            code="ERR_PRISM_STORE_INVALID",
        )
    return store


#: ``evolve``'s default: keep the agent's ``run_state``.
_KEEP: Any = object()


def _check_run_state(run_state: Any) -> None:
    """``run_state`` is ``None``, a mapping or ``RunStateOptions`` (checked in full when a run
    starts, since a mapping may leave fields to the host)."""
    if run_state is not None and not isinstance(run_state, Mapping | RunStateOptions):
        kind = type(run_state).__name__
        raise TypeError(f"run_state must be RunStateOptions or a mapping, got {kind}")


def _running_event_loop() -> str | None:
    """The async library whose event loop runs in this thread (``None``: none does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    return None


def _check_callable(value: Any, name: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")


class _FromConfig(Generic[T]):
    """A read-only attribute of :class:`Agent` that reads the same field of its config."""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, agent: None, owner: type[Any]) -> _FromConfig[T]: ...

    @overload
    def __get__(self, agent: Agent, owner: type[Any]) -> T: ...

    def __get__(self, agent: Agent | None, owner: type[Any]) -> T | _FromConfig[T]:
        if agent is None:
            return self
        value: T = getattr(agent.config, self.name)
        return value

    def __set__(self, agent: Agent, value: Any) -> None:
        # Runs read the frozen config, so an assigned attribute would be silently ignored.
        raise AttributeError(
            f"Agent.{self.name} is read-only: create the agent with {self.name}=... "
            "(its configuration is frozen in agent.config)"
        )


class Agent:
    """An agent definition. It holds no run state: sessions run it.

    A malformed configuration value is refused here, when the agent is created, with
    :class:`~prism_core.AgentConfigError` (``ERR_PRISM_AGENT_CONFIG``) or a more specific
    :class:`~prism_core.PrismError`. What it accepted is :attr:`config`, a frozen
    :class:`~prism_core.AgentConfig` that sessions and runs read; the agent's attributes of
    the same names (``agent.model``, ``agent.limits``, …) read it too. ``store`` (the session
    store new sessions use) is the one attribute a host may replace.
    """

    id = _FromConfig[str | None]()
    name = _FromConfig[str | None]()
    description = _FromConfig[str | None]()
    model = _FromConfig[ModelConfig]()
    provider = _FromConfig[AIProvider | None]()
    provider_source = _FromConfig[Any]()
    instructions = _FromConfig[str | None]()
    system_prompt = _FromConfig[tuple[Any, ...]]()
    registry = _FromConfig[ToolRegistry]()
    guardrails = _FromConfig[GuardrailConfig]()
    plugin_host = _FromConfig[PluginHost]()
    middleware = _FromConfig[MiddlewareChain]()
    loop_catalogue = _FromConfig[Mapping[str, Any]]()
    loop = _FromConfig[Any]()
    limits = _FromConfig[RunLimits]()
    retry = _FromConfig[RetryConfig | None]()
    compaction = _FromConfig[Any]()
    activate_all_skills = _FromConfig[bool]()
    skills_disclosure = _FromConfig[str]()
    redactor = _FromConfig[Redactor | None]()
    trust = _FromConfig[ToolPolicy | None]()
    permission = _FromConfig[ToolPolicy | None]()
    validate = _FromConfig[ToolValidator | None]()
    run_state = _FromConfig[Any]()
    skills = _FromConfig[Any]()
    metadata = _FromConfig[Mapping[str, Any]]()
    provider_options = _FromConfig[Mapping[str, Any]]()
    thinking_level = _FromConfig[str | None]()
    provider_request_policies = _FromConfig[tuple[Callable[..., Any], ...]]()
    turn_policy = _FromConfig[Any]()
    stop_hooks = _FromConfig[tuple[Any, ...]]()
    thread_limiter = _FromConfig[anyio.CapacityLimiter | None]()
    pack_catalogue = _FromConfig[Mapping[str, GuardrailPack]]()
    context_window = _FromConfig[int | None]()
    output_type = _FromConfig[OutputType | None]()
    input_layout = _FromConfig[str]()
    tool_result_fold = _FromConfig[Any]()
    attention_compiler = _FromConfig[Any]()
    secure = _FromConfig[bool]()

    @_typed_config
    def __init__(
        self,
        *,
        model: ModelConfig | Mapping[str, Any],
        id: str | None = None,
        name: str | None = None,
        description: str | None = None,
        provider: AIProvider | None = None,
        provider_source: ProviderResolver | None = None,
        instructions: str | None = None,
        system_prompt: Sequence[Any] = (),
        tools: Iterable[ToolDefinition] | ToolRegistry = (),
        store: SessionStore | None = None,
        guardrails: Any = None,
        middleware: Sequence[Any] = (),
        loop: Any = None,
        limits: RunLimits | Mapping[str, Any] | None = None,
        retry: RetryConfig | Mapping[str, Any] | bool | None = None,
        compaction: Any = None,
        redactor: Redactor | None = None,
        validate: ToolValidator | None = None,
        run_state: Any = None,
        skills: Any = None,
        plugins: Iterable[object] = (),
        metadata: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        thinking_level: str | None = None,
        provider_request_policies: Sequence[Callable[..., Any]] = (),
        activate_all_skills: bool = False,
        skills_disclosure: str = "progressive",
        context_window: int | None = None,
        trust: ToolPolicy | None = None,
        permission: ToolPolicy | None = None,
        turn_policy: Any = None,
        stop_hooks: Any = None,
        thread_limiter: anyio.CapacityLimiter | None = None,
        output_type: Any = None,
        input_layout: str = "cache_aware",
        tool_result_fold: Any = None,
        attention_compiler: Any = None,
    ) -> None:
        model_config = coerce_model(model)
        for label, value in (
            ("id", id),
            ("name", name),
            ("description", description),
            ("instructions", instructions),
        ):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{label} must be a string")
        if provider is not None and not callable(getattr(provider, "generate", None)):
            raise TypeError("provider must be an AIProvider with a generate(request) method")
        _check_callable(provider_source, "provider_source")
        if isinstance(system_prompt, str):
            system_prompt = (system_prompt,)
        prompt_layers: tuple[Any, ...] = tuple(system_prompt)
        registry = tools if isinstance(tools, ToolRegistry) else create_tool_registry(tools)
        # Without a store, the agent's sessions share one memory store of its own, so a run
        # suspended on this agent object can be resumed on it.
        self.store: SessionStore = (
            _check_session_store(store) if store is not None else create_memory_session_store()
        )
        if thread_limiter is not None and not isinstance(thread_limiter, anyio.CapacityLimiter):
            raise TypeError(
                "thread_limiter must be an anyio.CapacityLimiter, got "
                f"{type(thread_limiter).__name__}"
            )
        guardrail_config = coerce_guardrails(guardrails)
        plugin_host = PluginHost(plugins)
        middleware_chain = MiddlewareChain((*middleware, *plugin_host.middleware()))
        loop_catalogue: dict[str, Any] = {
            "single-shot": SingleShotLoop(),
        }
        for strategy in plugin_host.loop_strategies():
            loop_catalogue[strategy.name] = strategy
        loop_strategy = coerce_loop(loop, loop_catalogue) if loop is not None else None
        packs: dict[str, GuardrailPack] = pack_catalogue(plugin_host.guardrail_packs())
        run_limits = coerce_limits(limits)
        retry_config = coerce_retry(retry)
        compaction_config = coerce_compaction(compaction)
        if skills is not None and not isinstance(skills, SkillRegistry):
            skills = tuple(skills)
            for skill in skills:
                if not isinstance(skill, Skill):
                    raise TypeError("skills must be Skill values or a SkillRegistry")
        if skills_disclosure not in ("progressive", "eager"):
            raise ValueError("skills_disclosure must be 'progressive' or 'eager'")
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window < 1
        ):
            raise ValueError("context_window must be a positive integer")
        if redactor is not None and not callable(getattr(redactor, "redact_text", None)):
            raise TypeError("redactor must have redact_text(text) (see create_secret_redactor)")
        _check_callable(validate, "validate")
        _check_callable(trust, "trust")
        _check_callable(permission, "permission")
        _check_run_state(run_state)
        if thinking_level is not None and not isinstance(thinking_level, str):
            raise TypeError("thinking_level must be a string")
        for policy in provider_request_policies:
            _check_callable(policy, "provider request policies")
        agent_turn_policy = coerce_turn_policy(turn_policy)
        check_turn_policy_limits(agent_turn_policy, run_limits.max_turns)
        check_input_layout(input_layout)
        fold = coerce_tool_result_fold(tool_result_fold)
        attention = coerce_attention_compiler(attention_compiler, context_window)
        #: What the agent accepted, as one frozen value (see :class:`AgentConfig`).
        self.config = AgentConfig(
            id=id,
            name=name,
            description=description,
            model=model_config,
            provider=provider,
            provider_source=provider_source,
            instructions=instructions,
            system_prompt=prompt_layers,
            registry=registry,
            guardrails=guardrail_config,
            plugin_host=plugin_host,
            middleware=middleware_chain,
            loop_catalogue=MappingProxyType(loop_catalogue),
            loop=loop_strategy,
            limits=run_limits,
            retry=retry_config,
            compaction=compaction_config,
            activate_all_skills=bool(activate_all_skills),
            skills_disclosure=skills_disclosure,
            redactor=redactor,
            trust=trust,
            permission=permission,
            validate=validate,
            run_state=run_state,
            skills=skills,
            metadata=MappingProxyType(dict(metadata or {})),
            provider_options=MappingProxyType(dict(provider_options or {})),
            thinking_level=thinking_level,
            provider_request_policies=tuple(provider_request_policies),
            turn_policy=agent_turn_policy,
            stop_hooks=coerce_stop_hooks(stop_hooks),
            thread_limiter=thread_limiter,
            pack_catalogue=MappingProxyType(packs),
            context_window=context_window,
            output_type=coerce_output_type(output_type),
            input_layout=input_layout,
            tool_result_fold=fold,
            attention_compiler=attention,
        )

    @property
    def label(self) -> str:
        """The agent's id, else its name, else ``"agent"``."""
        return self.id or self.name or "agent"

    def evolve(self, *, store: SessionStore | None = None, run_state: Any = _KEEP) -> Agent:
        """A copy of this agent on ``store`` (its sessions' store) and with ``run_state`` (its
        durable options), sharing everything else, as an adapter or a worker that owns the
        stores needs it; the agent itself is unchanged. ``run_state`` is checked as
        ``create_agent`` checks it (``RunStateOptions``, a mapping, or ``None``)."""
        copied = copy.copy(self)
        if store is not None:
            copied.store = _check_session_store(store)
        if run_state is not _KEEP:
            _check_run_state(run_state)
            copied.config = attrs.evolve(self.config, run_state=run_state)
        return copied

    def hosted(
        self,
        stores: Any,
        *,
        definition_revision: str,
        ownership: Mapping[str, str] | None = None,
        checkpoint_policy: str = "every-turn",
        lease_ms: int | None = None,
        interrupt_before_tool: bool = False,
        checkpoint_metadata: Any = None,
        notify: bool = False,
    ) -> Agent:
        """A copy of this agent that a host runs durably on ``stores`` (a
        :class:`~prism_core.StorePair`: sessions on ``stores.sessions``, checkpoints on
        ``stores.checkpoints``) for ``ownership``, under ``definition_revision``.

        The host owns the stores, the revision, the checkpoint policy, the ownership, the
        fencing token and the lease it gives; the agent keeps the rest of its ``run_state``
        (``interrupt_before_tool`` and ``notify``, which a host may only turn on, session
        state, skill bodies, the state bound, its metadata with the host's added); a host
        with notifiers passes ``notify=True`` so the runs it starts write their state
        changes to the outbox (``RunStateOptions.notify``). An agent whose own
        ``run_state`` names another owner is refused (:class:`~prism_core.AgentRunStateError`,
        code ``ERR_PRISM_HOSTED_OWNER``). The agent itself is unchanged.
        """
        checkpoints = getattr(stores, "checkpoints", None)
        sessions = getattr(stores, "sessions", None)
        if checkpoints is None or sessions is None:
            raise TypeError("stores must be a StorePair (checkpoints and sessions)")
        run_state = hosted_run_state(
            self.config.run_state,
            checkpoints,
            definition_revision=definition_revision,
            ownership=ownership,
            checkpoint_policy=checkpoint_policy,
            lease_ms=lease_ms,
            interrupt_before_tool=interrupt_before_tool,
            checkpoint_metadata=checkpoint_metadata,
            notify=notify,
        )
        return self.evolve(store=sessions, run_state=run_state)

    def run_sync(self, input: Any, **run_options: Any) -> AgentRunResult:
        """Run ``input`` on a new session in a fresh event loop and return its result, for
        scripts and notebooks: ``agent.create_session().run(input, **run_options)`` without
        the ``async``. Like ``run()``, it raises :class:`~prism_core.AgentRunError` for a
        failed or aborted run. Inside a running event loop (async code, a notebook's own
        loop) it is refused with :class:`~prism_core.PrismError` code
        ``ERR_PRISM_RUN_SYNC_IN_LOOP``: await ``session.run()`` there instead."""
        running = _running_event_loop()
        if running is not None:
            raise PrismError(
                f"agent.run_sync() cannot run inside a running {running} event loop; "
                "there, await agent.create_session().run(...) instead",
                code="ERR_PRISM_RUN_SYNC_IN_LOOP",
            )
        session = self.create_session()
        return anyio.run(functools.partial(session.run, input, **run_options))

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> ToolDefinition:
        """This agent as a tool another agent can call (a sub-agent).

        The tool's ``name`` defaults to the agent's id, its ``description`` to the agent's
        ``description`` (else a line naming the agent), and its parameters are ``{"input":
        string}``. A call runs this agent on ``input`` in a child session on the calling run's
        session store, and its result is the child's final text (its ``output`` when it has
        an ``output_type``). Under a durable parent the child is durable on the same
        checkpoint store and policy; a child suspension suspends the parent with nested
        decisions (see :func:`~prism_core.nested_approval_id` and ``docs/subagents.md``). The
        parent's limits bound the child and its tool-call guards apply to the child's calls.
        """
        tool_name = name if name is not None else self.id
        if not isinstance(tool_name, str) or not tool_name:
            raise AgentConfigError("as_tool needs a name= when the agent has no id")
        if description is not None and not isinstance(description, str):
            raise AgentConfigError("as_tool's description must be a string")
        text = (
            description
            or self.description
            or (
                f"Delegate a task to the {self.name or tool_name} agent: give it the task as "
                "input; it answers with its result."
            )
        )
        return ToolDefinition(
            tool_name,
            SubAgentTool(self),
            description=text,
            parameters=dict(CHILD_INPUT_SCHEMA),
            # Calling it again continues the same child run (its ids derive from the call).
            idempotent=True,
        )

    def create_session(
        self,
        *,
        id: str | None = None,
        store: SessionStore | None = None,
        leaf_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        guardrail_packs: Any = None,
        snapshot_cache_ttl_ms: float = DEFAULT_SNAPSHOT_CACHE_TTL_MS,
    ) -> AgentSession:
        """A new session. Its store is ``store``, else the agent's (without ``store=``, a memory
        store the agent's sessions share)."""
        if id is not None and (not isinstance(id, str) or not id):
            raise ValueError("session id must be a non-empty string")
        compiled = (
            compile_guardrail_packs(
                guardrail_packs,
                catalogue=self.pack_catalogue,
                can_suspend=True,
                redactor=self.redactor,
            )
            if guardrail_packs
            else None
        )
        return AgentSession(
            self,
            id=id or f"session_{uuid.uuid4().hex}",
            store=store or self.store,
            leaf_id=leaf_id,
            metadata=dict(metadata or {}),
            compiled_packs=compiled,
            snapshot_cache_ttl_ms=snapshot_cache_ttl_ms,
        )


def create_agent(**config: Any) -> Agent:
    """Build an :class:`Agent` from explicit configuration (see ``Agent`` for the keywords)."""
    return Agent(**config)


_SECURE_LIMIT_AXES = (
    "max_turns",
    "max_provider_attempts",
    "max_tool_rounds",
    "max_tool_calls",
    "max_wall_time_ms",
    "max_total_tokens",
)


def create_secure_agent(**options: Any) -> Agent:
    """An agent composed fail-closed: every safety seam must be given explicitly.

    Requires an ``id``; ``run_state`` with checkpoints, a non-blank ``definition_revision``
    and a non-empty ``ownership``; a ``redactor``; ``trust`` and ``permission`` policies;
    finite ``limits`` on turns, provider attempts, tool rounds, tool calls, wall time and
    total tokens; a ``validate`` tool-argument validator; and a non-empty ``parameters``
    schema on every tool. Tools go into a registry that refuses duplicates; pre-tool
    interruption is always on. Runs may narrow limits but cannot replace ``run_state`` or
    the ``redactor``.
    """
    missing = [
        name
        for name in ("id", "run_state", "redactor", "trust", "permission", "limits", "validate")
        if options.get(name) is None
    ]
    if missing:
        raise PrismError(
            f"create_secure_agent needs {', '.join(missing)}", code="ERR_PRISM_SECURE_AGENT"
        )
    run_state = coerce_run_state_options(options["run_state"])
    assert run_state is not None
    if not run_state.ownership:
        raise PrismError(
            "create_secure_agent needs run_state.ownership (a non-empty owner scope)",
            code="ERR_PRISM_SECURE_AGENT",
        )
    options["run_state"] = attrs.evolve(run_state, interrupt_before_tool=True)
    limits = coerce_limits(options["limits"])
    unbounded = [axis for axis in _SECURE_LIMIT_AXES if getattr(limits, axis) is None]
    if unbounded:
        raise PrismError(
            f"create_secure_agent needs finite limits for {', '.join(unbounded)}",
            code="ERR_PRISM_SECURE_AGENT",
        )
    tools = options.get("tools", ())
    if isinstance(tools, ToolRegistry):
        tools = tools.definitions()
    tools = tuple(tools)
    for tool in tools:
        if not tool.parameters:
            raise PrismError(
                f"create_secure_agent needs a parameters schema on tool {tool.name!r}",
                code="ERR_PRISM_SECURE_AGENT",
            )
    options["tools"] = create_tool_registry(tools, duplicate="error")
    agent = Agent(**options)
    agent.config = attrs.evolve(agent.config, secure=True)
    return agent


def create_agent_session(*, agent: Agent, **session_config: Any) -> AgentSession:
    """``agent.create_session(**session_config)``."""
    return agent.create_session(**session_config)
