"""The durable boundary: everything the run loop may use of ``durable/``, in one place.

``runs/`` imports durable names from here only, never from the private modules behind it, so
the checkpointing side can change its internals without the run loop noticing. Nothing here
imports ``runs/``, ``sessions/`` or ``agents``; the run is read through :class:`HostRun`.

It must not hold behaviour of its own: it only names what ``runs/`` may use.
"""

from ._fingerprint import agent_fingerprint
from ._host import HostAgent, HostCounters, HostRun, HostSession
from ._lifetime import check_store_lifetimes
from ._options import DEFAULT_MAX_PENDING_DECISIONS as MAX_PENDING_DECISIONS
from ._options import RunStateOptions, coerce_run_state_options
from ._run import DurableRun, Gate, RunStateInfo, new_approval_id, scope_for
from ._run_guards import run_guardrail_identities
from ._state import DecisionKind, Interruption

__all__ = (
    "DecisionKind",
    "DurableRun",
    "Gate",
    "HostAgent",
    "HostCounters",
    "HostRun",
    "HostSession",
    "MAX_PENDING_DECISIONS",
    "Interruption",
    "RunStateInfo",
    "RunStateOptions",
    "agent_fingerprint",
    "check_store_lifetimes",
    "coerce_run_state_options",
    "new_approval_id",
    "run_guardrail_identities",
    "scope_for",
)
