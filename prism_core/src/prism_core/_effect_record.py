"""The on-call's ledger record: one call of a tool that is not read-only, as a run made it.

An :class:`EffectRecord` is written by the durable run that makes the call, in the checkpoint
commits the run already makes, and kept by the checkpoint store after the run's own record is
gone (``durable/_effects.py`` declares how a store keeps them, ``durable/_ledger.py`` how a run
writes them). This module is the value and its JSON form only: it must not read or write a
store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, cast, get_args

import attrs

__all__ = (
    "EFFECT_STATUSES",
    "EffectPage",
    "EffectRecord",
    "EffectStatus",
    "effect_from_json",
    "text_hash",
)

EffectStatus: TypeAlias = Literal[
    "dispatched",
    "completed",
    "failed",
    "in_doubt",
    "resolved_completed",
    "resolved_not_started",
    "resolved_failed",
]
#: Every status an effect record can have, in the order a call can reach them.
EFFECT_STATUSES: tuple[str, ...] = get_args(EffectStatus)


def text_hash(data: bytes) -> str:
    """sha256 hex of ``data`` (the form of every hash the ledger keeps)."""
    return hashlib.sha256(data).hexdigest()


@attrs.frozen(kw_only=True)
class EffectRecord:
    """One call of a tool that is not ``effect="read"``, as the run's ledger keeps it.

    - ``run_id``, ``session_id``, ``agent_id``: the run that made the call; ``parent_run_id``
      the run whose sub-agent call started that run (``None`` for a top-level run).
    - ``tool_name``, ``tool_call_id``, ``idempotency_key`` (the key the tool's context
      carried), ``fencing_token`` (the run's token when the call was dispatched).
    - ``arguments``: the call's arguments, redacted with the run's redactor (after an erasure,
      the text ``"sha256:<hex>"`` of their hash); ``arguments_hash``: sha256 hex of their
      canonical JSON as the call ran.
    - ``status``: ``"dispatched"`` (started, not known to have finished), ``"completed"``,
      ``"failed"`` (the tool raised or answered an error), ``"in_doubt"`` (a ``continue``
      found it dispatched with no stored result: a crash inside the call), or how an in-doubt
      call was settled: ``"resolved_completed"``, ``"resolved_not_started"``,
      ``"resolved_failed"`` (by an operator, the tool's ``reconcile``, or the kernel for an
      idempotent tool).
    - ``result_hash``: sha256 hex of the canonical JSON of the call's result (its value, or
      its error), once there is one.
    - ``started_at``, ``finished_at``: epoch seconds of the dispatch and of the outcome.
    - ``executed_by``: the process that ran the call, ``"<hostname>:<pid>"``.
    - ``approved_by``: the actors of the audit's ``allow_*`` records that let it run, oldest
      first (empty when no approval was needed).
    - ``ownership``: the run's owner scope.
    """

    run_id: str
    session_id: str
    parent_run_id: str | None = None
    agent_id: str
    tool_name: str
    tool_call_id: str
    idempotency_key: str
    fencing_token: int = 0
    arguments: Any = None
    arguments_hash: str
    status: EffectStatus
    result_hash: str | None = None
    started_at: float
    finished_at: float | None = None
    executed_by: str | None = None
    approved_by: tuple[str, ...] = ()
    ownership: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (every field; ``approved_by`` a list)."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "parent_run_id": self.parent_run_id,
            "agent_id": self.agent_id,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "idempotency_key": self.idempotency_key,
            "fencing_token": self.fencing_token,
            "arguments": self.arguments,
            "arguments_hash": self.arguments_hash,
            "status": self.status,
            "result_hash": self.result_hash,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "executed_by": self.executed_by,
            "approved_by": list(self.approved_by),
            "ownership": dict(self.ownership) if self.ownership else None,
        }


def _text(data: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    value = data.get(name)
    if value is None and optional:
        return None
    if type(value) is not str:
        raise ValueError(f"effect record field {name} is not text")
    return value


def _number(data: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    value = data.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"effect record field {name} is not a number")
    return float(value)


def effect_from_json(data: Any, *, status: str | None = None) -> EffectRecord:
    """The record of a JSON object from :meth:`EffectRecord.to_json` (``status``, when given,
    overrides the stored one: a store that keeps the status apart from the record). Raises
    ``ValueError`` naming the field that cannot be read."""
    if not isinstance(data, Mapping):
        raise ValueError("effect record is not a JSON object")
    chosen = status if status is not None else data.get("status")
    if chosen not in EFFECT_STATUSES:
        raise ValueError("effect record field status is not an effect status")
    approved = data.get("approved_by") or []
    if not isinstance(approved, list | tuple) or not all(type(a) is str for a in approved):
        raise ValueError("effect record field approved_by is not a list of text")
    ownership = data.get("ownership")
    if ownership is not None and not (
        isinstance(ownership, Mapping)
        and all(type(k) is str and type(v) is str for k, v in ownership.items())
    ):
        raise ValueError("effect record field ownership is not a map of text")
    token = data.get("fencing_token", 0)
    if isinstance(token, bool) or not isinstance(token, int):
        raise ValueError("effect record field fencing_token is not an integer")
    return EffectRecord(
        run_id=_text(data, "run_id"),
        session_id=_text(data, "session_id"),
        parent_run_id=_text(data, "parent_run_id", optional=True),
        agent_id=_text(data, "agent_id"),
        tool_name=_text(data, "tool_name"),
        tool_call_id=_text(data, "tool_call_id"),
        idempotency_key=_text(data, "idempotency_key"),
        fencing_token=token,
        arguments=data.get("arguments"),
        arguments_hash=_text(data, "arguments_hash"),
        status=cast(EffectStatus, chosen),
        result_hash=_text(data, "result_hash", optional=True),
        started_at=_number(data, "started_at"),
        finished_at=_number(data, "finished_at", optional=True),
        executed_by=_text(data, "executed_by", optional=True),
        approved_by=tuple(approved),
        ownership=dict(ownership) if ownership else None,
    )


@attrs.frozen
class EffectPage:
    """One page of ``list_effects``: the records in the order they were first written, and
    the ``cursor`` of the next page (``None`` on the last). A page may hold fewer than
    ``limit`` records and still have a cursor (a store bounds the work of one call); only a
    ``None`` cursor ends the listing."""

    effects: tuple[EffectRecord, ...]
    cursor: str | None = None
