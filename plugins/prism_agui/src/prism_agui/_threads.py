"""Threads: which caller a thread belongs to and which run it ran last.

A thread is a Prism session (``threadId`` is the session id), claimed through the web layer's
session claims (:class:`prism_web.SessionClaims`) under ``THREAD_NAMESPACE``: another caller's
thread reads as absent, a session with entries but no claim of the caller's is refused, and
every write is a compare-and-swap, so two requests racing on one thread cannot both start a
run. The claim names the thread's latest run, the one a ``resume`` answers.
"""

from __future__ import annotations

from typing import Any

from prism_core import PrismError
from prism_web import SessionClaims

from ._errors import ThreadUnavailable

__all__ = ("THREAD_NAMESPACE", "thread_claims")

THREAD_NAMESPACE = "prism.agui-thread"


def _refuse(thread_id: str, why: str) -> PrismError:
    if why == "taken":
        return ThreadUnavailable(
            "the thread is not available to this caller (another caller's thread, or another "
            "run started on it just now)"
        )
    return ThreadUnavailable("the thread is not available to this caller")


def thread_claims(checkpoints: Any, sessions: Any, agent_id: str | None) -> SessionClaims:
    """The claims of the threads of agent ``agent_id`` on the app's stores."""
    return SessionClaims(
        checkpoints, sessions, namespace=THREAD_NAMESPACE, agent_id=agent_id, refuse=_refuse
    )
