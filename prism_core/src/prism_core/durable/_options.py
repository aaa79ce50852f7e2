"""Durable-run options (``run_state=``) and their limits.

It must not read or write a store: it validates configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .._approval_gate import check_approval_timeout
from .._echo import echo
from ..errors import AgentRunStateError
from ._checkpoints import MAX_STORED_INT, CheckpointStore

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
    "MAX_LEASE_MS",
    "MIN_LEASE_MS",
    "CheckpointMetadataSource",
    "CheckpointPolicy",
    "RunStateOptions",
    "coerce_run_state_options",
    "validate_lease_ms",
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
    #: How long a decision of this run may wait before ``expire_agent_runs`` expires it (a
    #: tool's own ``approval_timeout_ms`` wins); ``None``: decisions wait until decided.
    approval_timeout_ms: int | None = attrs.field(default=None, kw_only=True)
    #: Write the run's state changes (suspended, decided, expired, in doubt, finished) to the
    #: outbox, in the commits that make them, for the notifiers of whichever worker or
    #: server holds the stores (``prism_core.durable._outbox``); the flag rides the run's
    #: checkpoints, so every later writer of the run (a decision, an expiry) reports too.
    notify: bool = attrs.field(default=False, kw_only=True)


def _fail(message: str) -> AgentRunStateError:
    return AgentRunStateError(message)


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be stored: a lone surrogate (``"\\ud800"``) has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_revision(value: Any) -> str:
    """A non-blank UTF-8 ``definition_revision``, or :class:`AgentRunStateError`."""
    if not isinstance(value, str) or not str.strip(value):
        raise _fail("definition_revision must be a non-blank string")
    if not is_utf8(value):
        raise _fail("definition_revision must be valid UTF-8 text (it holds a lone surrogate)")
    return str.__str__(value)


def check_store(value: Any) -> CheckpointStore:
    """Something that looks like a :class:`CheckpointStore`."""
    for method in ("load", "save", "save_request", "delete", "list"):
        try:
            found = callable(getattr(value, method, None))
        except Exception:  # a hostile __getattr__ is a malformed option too
            found = False
        if not found:
            raise _fail(
                "checkpoints must be a CheckpointStore (load/save/save_request/delete/list)"
            )
    return value  # type: ignore[no-any-return]


def read_string_map(value: Any, what: str) -> dict[str, str]:
    """A plain ``dict[str, str]`` copy of the mapping ``value``, every string valid UTF-8.

    Anything else, including a mapping whose iteration raises, is an
    :class:`AgentRunStateError` naming ``what``.
    """
    if not isinstance(value, Mapping):
        raise _fail(f"{what} must be a mapping of strings, got {type(value).__name__}")
    try:
        items = list(value.items())
    except Exception as exc:  # the caller's mapping failed to iterate
        raise _fail(f"{what} could not be read as a mapping ({type(exc).__name__})") from exc
    out: dict[str, str] = {}
    for key, item in items:
        if not isinstance(key, str) or not isinstance(item, str):
            raise _fail(f"{what} keys and values must be strings, got {echo(key)}: {echo(item)}")
        key, item = str.__str__(key), str.__str__(item)
        if not is_utf8(key) or not is_utf8(item):
            raise _fail(f"{what} must be valid UTF-8 text (a lone surrogate in {echo(key)})")
        out[key] = item
    return out


def _read_options_mapping(value: Mapping[Any, Any]) -> dict[str, Any]:
    try:
        items = list(value.items())
    except Exception as exc:  # the caller's mapping failed to iterate
        raise _fail(f"run_state could not be read as a mapping ({type(exc).__name__})") from exc
    data: dict[str, Any] = {}
    for key, item in items:
        if not isinstance(key, str):
            raise _fail(f"run_state keys must be strings, got {echo(key)}")
        data[str.__str__(key)] = item
    known = {f.name for f in attrs.fields(RunStateOptions)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise _fail(f"unknown run_state keys {echo(unknown, 200)}; known: {sorted(known)}")
    if "checkpoints" not in data or "definition_revision" not in data:
        raise _fail("run_state needs checkpoints and definition_revision")
    return data


def _check_int(value: Any, *, low: int, high: int | None) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int)
        and low <= value
        and (high is None or value <= high)
    )


def coerce_run_state_options(value: Any) -> RunStateOptions | None:
    """Validate ``run_state=`` (a :class:`RunStateOptions` or a mapping of its fields).

    Every malformed field is an :class:`AgentRunStateError` whose message quotes at most a
    short prefix of the offending value; nothing is written or called before it.
    """
    if value is None:
        return None
    if isinstance(value, RunStateOptions):
        data = attrs.asdict(value, recurse=False)
    elif isinstance(value, Mapping):
        data = _read_options_mapping(value)
    else:
        raise _fail(f"run_state must be RunStateOptions or a mapping, got {type(value).__name__}")
    check_store(data["checkpoints"])
    data["definition_revision"] = check_revision(data["definition_revision"])
    policy = data.get("checkpoint_policy", "decision")
    if not isinstance(policy, str) or str.__str__(policy) not in ("decision", "every-turn"):
        raise _fail(f"checkpoint_policy must be 'decision' or 'every-turn', got {echo(policy)}")
    size = data.get("max_state_bytes", DEFAULT_MAX_AGENT_RUN_STATE_BYTES)
    if not _check_int(size, low=1, high=HARD_MAX_AGENT_RUN_STATE_BYTES):
        raise _fail(
            f"max_state_bytes must be an integer in 1..{HARD_MAX_AGENT_RUN_STATE_BYTES}, "
            f"got {echo(size)}"
        )
    for flag in (
        "interrupt_before_tool",
        "persist_session_state",
        "include_skill_bodies",
        "notify",
    ):
        if not isinstance(data.get(flag, False), bool):
            raise _fail(f"run_state.{flag} must be a bool, got {echo(data.get(flag))}")
    ownership = data.get("ownership")
    if ownership is not None:
        data["ownership"] = read_string_map(ownership, "ownership") or None
    token = data.get("fencing_token")
    if token is not None and not _check_int(token, low=0, high=MAX_STORED_INT):
        raise _fail(
            f"fencing_token must be an integer from 0 to {MAX_STORED_INT} (2**63 - 1), "
            f"got {echo(token)}"
        )
    validate_lease_ms(data.get("lease_ms"))
    try:
        check_approval_timeout(None, None, data.get("approval_timeout_ms"))
    except (TypeError, ValueError) as exc:
        raise _fail(str(exc)) from None
    metadata = data.get("checkpoint_metadata")
    if isinstance(metadata, Mapping):
        # A fixed map is checked (and copied) now, so a malformed one fails before any write.
        data["checkpoint_metadata"] = read_string_map(metadata, "checkpoint_metadata")
    elif metadata is not None and not callable(metadata):
        raise _fail("checkpoint_metadata must be a mapping of strings or a callable returning one")
    return RunStateOptions(**data)


#: Bounds on ``RunStateOptions.lease_ms`` (see :mod:`prism_core.durable._lease`).
MIN_LEASE_MS = 100
MAX_LEASE_MS = 86_400_000


def validate_lease_ms(value: Any) -> int | None:
    """``value`` if it is ``None`` or an integer in ``MIN_LEASE_MS..MAX_LEASE_MS``, else
    :class:`AgentRunStateError`."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_LEASE_MS <= value <= MAX_LEASE_MS
    ):
        raise AgentRunStateError(
            f"lease_ms must be an integer in {MIN_LEASE_MS}..{MAX_LEASE_MS}, got {echo(value)}"
        )
    return value
