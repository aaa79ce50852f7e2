"""The identities of sub-agent runs: a child run's ids and its nested approval ids.

A call of an ``agent.as_tool()`` tool runs its child in a session and run whose ids are
derived from the parent run and the tool call, so whichever worker runs the call again (a
resume, a ``continue`` after a crash) finds the same child. A child's pending decision is
offered on the parent under a nested approval id derived the same way: ``"sub_"`` and 64 hex
digits, equal for every worker and unguessable without the child's own approval id.

It must not read or write a store: these are pure functions of ids.
"""

from __future__ import annotations

import hashlib

__all__ = ("NESTED_APPROVAL_PREFIX", "child_run_id", "child_session_id", "nested_approval_id")

#: How every nested approval id starts (own approval ids start with ``appr_``).
NESTED_APPROVAL_PREFIX = "sub_"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def nested_approval_id(run_id: str, child_approval_id: str) -> str:
    """The approval id under which run ``run_id`` offers its child's pending decision
    ``child_approval_id``: ``"sub_"`` + 64 hex digits, deterministic."""
    return NESTED_APPROVAL_PREFIX + _digest("prism.nested-approval", run_id, child_approval_id)


def child_run_id(parent_run_id: str, tool_call_id: str) -> str:
    """The run id of the sub-agent run that ``tool_call_id`` of run ``parent_run_id`` starts."""
    return "run_" + _digest("prism.child-run", parent_run_id, tool_call_id)[:32]


def child_session_id(parent_run_id: str, tool_call_id: str) -> str:
    """The session id of that sub-agent run's own session."""
    return "session_" + _digest("prism.child-session", parent_run_id, tool_call_id)[:32]
