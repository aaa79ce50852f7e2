"""The settings every run task shares, checked once when the tasks are created."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._errors import CeleryConfigError

__all__ = ("MAX_LEASE_MS", "MIN_LEASE_MS", "TaskSettings", "check_store_url", "make_settings")

#: The lease bounds ``RunStateOptions(lease_ms=...)`` accepts.
MIN_LEASE_MS = 100
MAX_LEASE_MS = 86_400_000

_MEMORY_SQLITE = ("", ":memory:")


def check_store_url(url: Any, what: str) -> str:
    """``url`` when every worker process can open the same store from it.

    Each task opens its stores afresh, so a process-local store (``memory://``, an in-memory
    SQLite database) would lose every run between two tasks: refused with
    :class:`CeleryConfigError`. Other schemes are checked by the store plugins when a task
    opens them.
    """
    if not isinstance(url, str) or not url.strip():
        raise CeleryConfigError(f"{what} must be a non-empty store URL string")
    scheme, sep, rest = url.partition(":")
    if not sep:
        raise CeleryConfigError(f"{what} has no scheme; expected e.g. postgresql://host/db")
    base = scheme.split("+", 1)[0].lower()
    if base == "memory":
        raise CeleryConfigError(
            f"{what} is memory://: each task opens its stores afresh, so runs would not "
            "outlive a task; use postgresql://, redis:// or (one host only) sqlite:///path.db"
        )
    if base == "sqlite":
        path = rest.removeprefix("//").split("?", 1)[0]
        database = path[1:] if path.startswith("/") else path
        if database in _MEMORY_SQLITE or "mode=memory" in rest:
            raise CeleryConfigError(
                f"{what} is an in-memory SQLite database, which no other task or worker can "
                "read; use sqlite:///path/to/file.db (one host only), postgresql:// or redis://"
            )
    return url


@attrs.frozen
class TaskSettings:
    """What ``create_run_tasks`` was given, checked."""

    resolve_agent: Callable[[str], Any]
    store_url: str
    sessions_url: str
    lease_ms: int


def make_settings(
    *, resolve_agent: Any, store_url: Any, lease_ms: Any, sessions_url: Any
) -> TaskSettings:
    """Check the arguments of ``create_run_tasks``; :class:`CeleryConfigError` on a mistake."""
    if not callable(resolve_agent):
        raise CeleryConfigError("resolve_agent must be callable(agent_id)")
    if (
        isinstance(lease_ms, bool)
        or not isinstance(lease_ms, int)
        or not MIN_LEASE_MS <= lease_ms <= MAX_LEASE_MS
    ):
        raise CeleryConfigError(
            f"lease_ms must be an integer in {MIN_LEASE_MS}..{MAX_LEASE_MS}, got {lease_ms!r}"
        )
    checkpoints = check_store_url(store_url, "store_url")
    sessions = (
        checkpoints if sessions_url is None else check_store_url(sessions_url, "sessions_url")
    )
    return TaskSettings(
        resolve_agent=resolve_agent,
        store_url=checkpoints,
        sessions_url=sessions,
        lease_ms=lease_ms,
    )
