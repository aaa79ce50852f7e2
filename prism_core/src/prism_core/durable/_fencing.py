"""Fencing: every claim of a durable run raises the record's fencing token.

A claim (any resume that writes: approve, deny, a batch, ``continue``, resolutions) saves the
record with a fencing token above the stored one: the stored token + 1 (a record without a
token counts as 0), or the host's explicit ``fencing_token=``, which must be above the stored
token. The stores refuse a save whose token is below the stored one, and every write of a
run also names the version it expects, so a worker whose claim was superseded fails its next
write (a turn checkpoint, a ``dispatched`` mark, a terminal state) or its pre-dispatch check
with :class:`~prism_core.CheckpointConflictError`, and stops without running another tool.

It must not write: it computes and checks tokens, and the claim (``_resume``) writes them.
"""

from __future__ import annotations

from typing import Any

from .._echo import echo
from ..errors import AgentRunStateError, CheckpointConflictError
from ._checkpoints import MAX_STORED_INT, CheckpointRecord

__all__ = ("claim_token", "validate_claim_options")


def validate_claim_options(fencing_token: Any, force: Any) -> None:
    """Refuse a malformed ``fencing_token`` or ``force`` before any store access."""
    if fencing_token is not None and (
        isinstance(fencing_token, bool)
        or not isinstance(fencing_token, int)
        or not 0 <= fencing_token <= MAX_STORED_INT
    ):
        raise AgentRunStateError(
            f"fencing_token must be an integer from 0 to {MAX_STORED_INT} (2**63 - 1), "
            f"got {echo(fencing_token)}"
        )
    if not isinstance(force, bool):
        raise AgentRunStateError(f"force must be a bool, got {echo(force)}")


def claim_token(record: CheckpointRecord, requested: int | None) -> int:
    """The fencing token a claim over ``record`` writes.

    Raises :class:`~prism_core.CheckpointConflictError` (code ``ERR_PRISM_FENCING_TOKEN``)
    when ``requested`` is not above the stored token; nothing has been written then.
    """
    stored = record.fencing_token
    if requested is None:
        return (stored or 0) + 1
    if stored is not None and requested <= stored:
        raise CheckpointConflictError(
            f"fencing_token {requested} is not above the run's stored token {stored}; "
            "pass a higher token or none (the stored token + 1)",
            code="ERR_PRISM_FENCING_TOKEN",
        )
    return requested
