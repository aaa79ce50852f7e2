"""Hosting an agent: the durable options of an agent a host runs on its own stores.

One rule for every host (the HTTP faces, the Celery tasks, the workers). The **host owns**
where and for whom the run lives: the checkpoint store, the definition revision, the
checkpoint policy, the ownership, the fencing token (never carried over) and the lease when it
gives one. The **agent keeps** how its runs behave: ``interrupt_before_tool`` and ``notify`` (a
host may turn them on, never off), ``persist_session_state``, ``include_skill_bodies``,
``max_state_bytes``, its lease when the host gives none, and its ``checkpoint_metadata`` (the
host's entries are added, and win a shared key). An agent whose own ``run_state`` names an
owner is served for that owner only: hosting it for another is refused (:data:`HOSTED_OWNER_CODE`).

It validates configuration only: it must not read or write a store (``Agent.hosted`` in
``agents`` applies it to a copy of the agent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._echo import echo
from ..errors import AgentRunStateError
from ._checkpoints import CheckpointStore
from ._options import (
    CheckpointMetadataSource,
    RunStateOptions,
    coerce_run_state_options,
    read_string_map,
)

__all__ = ("HOSTED_OWNER_CODE", "HOST_OWNED_OPTIONS", "hosted_run_state")

#: The ``run_state`` fields a host sets whatever the agent's own ``run_state`` says.
HOST_OWNED_OPTIONS = frozenset(
    {"checkpoints", "definition_revision", "checkpoint_policy", "ownership", "fencing_token"}
)
#: The code of the refusal to host an agent for another owner than its ``run_state`` names.
HOSTED_OWNER_CODE = "ERR_PRISM_HOSTED_OWNER"


def _agent_options(configured: Any) -> dict[str, Any]:
    if configured is None:
        return {}
    if isinstance(configured, RunStateOptions):
        return attrs.asdict(configured, recurse=False)
    if not isinstance(configured, Mapping):
        kind = type(configured).__name__
        raise AgentRunStateError(
            f"the agent's run_state must be RunStateOptions or a mapping, got {kind}"
        )
    known = {field.name for field in attrs.fields(RunStateOptions)}
    options = dict(configured.items())
    unknown = sorted(str(key) for key in options if key not in known)
    if unknown:
        raise AgentRunStateError(f"unknown run_state keys {echo(unknown, 200)}")
    return options


def _owner(value: Any, what: str) -> dict[str, str] | None:
    if value is None:
        return None
    return read_string_map(value, what) or None


def _resolved(source: CheckpointMetadataSource) -> Mapping[str, str]:
    if source is None:
        return {}
    return source() if callable(source) else source


def _merged_metadata(
    agent: CheckpointMetadataSource, host: CheckpointMetadataSource
) -> CheckpointMetadataSource:
    """The agent's metadata with the host's added (the host's win a shared key); a callable
    when either is one, resolved at each write."""
    if host is None:
        return agent
    if agent is None:
        return host
    if not callable(agent) and not callable(host):
        return {**agent, **host}

    def both() -> Mapping[str, str]:
        return {**_resolved(agent), **_resolved(host)}

    return both


def hosted_run_state(
    configured: Any,
    checkpoints: CheckpointStore,
    *,
    definition_revision: str,
    ownership: Mapping[str, str] | None = None,
    checkpoint_policy: str = "every-turn",
    lease_ms: int | None = None,
    interrupt_before_tool: bool = False,
    checkpoint_metadata: CheckpointMetadataSource = None,
    notify: bool = False,
) -> RunStateOptions:
    """The durable options of an agent whose own ``run_state`` is ``configured`` (``None``, a
    mapping without the host-owned keys, or ``RunStateOptions``) when a host runs it on
    ``checkpoints`` for ``ownership`` (see the module for the rule). Every value is checked as
    ``run_state=`` is (:class:`~prism_core.AgentRunStateError`)."""
    kept = _agent_options(configured)
    host_owner = _owner(ownership, "ownership")
    own_owner = _owner(kept.get("ownership"), "the agent's run_state.ownership")
    if own_owner is not None and own_owner != host_owner:
        raise AgentRunStateError(
            "this agent's run_state names its owner; it is not served for another caller",
            code=HOSTED_OWNER_CODE,
        )
    options = {key: value for key, value in kept.items() if key not in HOST_OWNED_OPTIONS}
    options.update(
        checkpoints=checkpoints,
        definition_revision=definition_revision,
        checkpoint_policy=checkpoint_policy,
        ownership=host_owner,
        fencing_token=None,
    )
    if lease_ms is not None:
        options["lease_ms"] = lease_ms
    for flag, value in (("interrupt_before_tool", interrupt_before_tool), ("notify", notify)):
        if value is True:
            options[flag] = True
        elif not isinstance(value, bool):
            raise AgentRunStateError(f"{flag} must be a bool")
    options["checkpoint_metadata"] = _merged_metadata(
        options.get("checkpoint_metadata"), checkpoint_metadata
    )
    hosted = coerce_run_state_options(options)
    assert hosted is not None
    return hosted
