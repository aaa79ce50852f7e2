"""Durable-run options (``run_state=``) and their limits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ..errors import AgentRunStateError
from ._checkpoints import CheckpointStore, normalise_ownership
from ._lease import validate_lease_ms

__all__ = (
    "AGENT_RUN_NAMESPACE",
    "DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS",
    "DEFAULT_MAX_AGENT_RUN_STATE_BYTES",
    "DEFAULT_MAX_PENDING_DECISIONS",
    "DEFAULT_MAX_STICKY_DECISIONS",
    "HARD_MAX_AGENT_RUN_STATE_BYTES",
    "HARD_MAX_PENDING_DECISIONS",
    "HARD_MAX_STICKY_DECISIONS",
    "MAX_AGENT_RUN_METADATA_BYTES",
    "CheckpointMetadataSource",
    "CheckpointPolicy",
    "RunStateOptions",
    "coerce_run_state_options",
)

AGENT_RUN_NAMESPACE = "prism.agent-run"
DEFAULT_MAX_AGENT_RUN_STATE_BYTES = 262144
HARD_MAX_AGENT_RUN_STATE_BYTES = 1048576
MAX_AGENT_RUN_METADATA_BYTES = 4096
DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS = 10000
DEFAULT_MAX_PENDING_DECISIONS = 32
HARD_MAX_PENDING_DECISIONS = 128
DEFAULT_MAX_STICKY_DECISIONS = 64
HARD_MAX_STICKY_DECISIONS = 256

CheckpointPolicy: TypeAlias = Literal["decision", "every-turn"]
#: A sidecar map, or a zero-argument callable returning one, resolved at each write.
CheckpointMetadataSource: TypeAlias = Mapping[str, str] | Callable[[], Mapping[str, str]] | None


@attrs.frozen
class RunStateOptions:
    """Make a run durable: where checkpoints go, the definition revision that must match on
    resume, when to suspend, and what rides the checkpoint."""

    checkpoints: CheckpointStore = attrs.field(eq=False)
    definition_revision: str
    interrupt_before_tool: bool = attrs.field(default=False, kw_only=True)
    checkpoint_policy: CheckpointPolicy = attrs.field(default="decision", kw_only=True)
    persist_session_state: bool = attrs.field(default=False, kw_only=True)
    include_skill_bodies: bool = attrs.field(default=False, kw_only=True)
    max_state_bytes: int = attrs.field(default=DEFAULT_MAX_AGENT_RUN_STATE_BYTES, kw_only=True)
    checkpoint_metadata: CheckpointMetadataSource = attrs.field(
        default=None, eq=False, kw_only=True
    )
    ownership: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)
    fencing_token: int | None = attrs.field(default=None, kw_only=True)
    #: Hold a lease of this many milliseconds while a worker works on the run (see
    #: ``prism_core.durable._lease``); ``None``: no lease.
    lease_ms: int | None = attrs.field(default=None, kw_only=True)


def _fail(message: str) -> AgentRunStateError:
    return AgentRunStateError(message)


def check_revision(value: Any) -> str:
    """A non-blank ``definition_revision``, or :class:`AgentRunStateError`."""
    if not isinstance(value, str) or not value.strip():
        raise _fail("definition_revision must be a non-blank string")
    return value


def check_store(value: Any) -> CheckpointStore:
    """Something that looks like a :class:`CheckpointStore`."""
    for method in ("load", "save", "delete", "list"):
        if not callable(getattr(value, method, None)):
            raise _fail("checkpoints must be a CheckpointStore (load/save/delete/list)")
    return value  # type: ignore[no-any-return]


def coerce_run_state_options(value: Any) -> RunStateOptions | None:
    """Validate ``run_state=`` (a :class:`RunStateOptions` or a mapping of its fields)."""
    if value is None:
        return None
    if isinstance(value, RunStateOptions):
        data = attrs.asdict(value, recurse=False)
    elif isinstance(value, Mapping):
        data = dict(value)
        known = {f.name for f in attrs.fields(RunStateOptions)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise _fail(f"unknown run_state keys {unknown}; known: {sorted(known)}")
        if "checkpoints" not in data or "definition_revision" not in data:
            raise _fail("run_state needs checkpoints and definition_revision")
    else:
        raise _fail(f"run_state must be RunStateOptions or a mapping, got {type(value).__name__}")
    check_store(data["checkpoints"])
    check_revision(data["definition_revision"])
    policy = data.get("checkpoint_policy", "decision")
    if policy not in ("decision", "every-turn"):
        raise _fail(f"checkpoint_policy must be 'decision' or 'every-turn', got {policy!r}")
    size = data.get("max_state_bytes", DEFAULT_MAX_AGENT_RUN_STATE_BYTES)
    if (
        isinstance(size, bool)
        or not isinstance(size, int)
        or not 1 <= size <= HARD_MAX_AGENT_RUN_STATE_BYTES
    ):
        raise _fail(
            f"max_state_bytes must be an integer in 1..{HARD_MAX_AGENT_RUN_STATE_BYTES}, "
            f"got {size!r}"
        )
    for flag in ("interrupt_before_tool", "persist_session_state", "include_skill_bodies"):
        if not isinstance(data.get(flag, False), bool):
            raise _fail(f"run_state.{flag} must be a bool")
    try:
        data["ownership"] = normalise_ownership(data.get("ownership"))
    except ValueError as exc:
        raise _fail(str(exc)) from exc
    token = data.get("fencing_token")
    if token is not None and (isinstance(token, bool) or not isinstance(token, int) or token < 0):
        raise _fail("fencing_token must be a non-negative integer")
    validate_lease_ms(data.get("lease_ms"))
    metadata = data.get("checkpoint_metadata")
    if metadata is not None and not callable(metadata) and not isinstance(metadata, Mapping):
        raise _fail("checkpoint_metadata must be a mapping of strings or a callable returning one")
    return RunStateOptions(**data)
