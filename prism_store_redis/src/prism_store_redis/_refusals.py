"""The refusals a session append's script outcome names, for a plain append and a shared
commit alike."""

from __future__ import annotations

from prism_core.stores import SessionConflictError, SessionEntry, SessionEntryNotFoundError, echo

__all__ = ("append_refusal",)


def append_refusal(outcome: str, entry: SessionEntry) -> None:
    """Raise the error an append's script ``outcome`` names (nothing for ``ok``)."""
    if outcome == "moved":
        raise SessionConflictError(
            f"session {echo(entry.session_id)} moved: its head is no longer the expected leaf"
        )
    if outcome == "duplicate":
        raise SessionConflictError(f"entry id {echo(entry.id)} already exists")
    if outcome == "parent":
        raise SessionEntryNotFoundError(
            f"parent entry {echo(entry.parent_id)} is not in session {echo(entry.session_id)}"
        )
