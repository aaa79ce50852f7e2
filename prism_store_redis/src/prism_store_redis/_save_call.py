"""``SaveCall``: one checkpoint save as the keys and arguments of ``CHECKPOINT_SAVE``, and
what the script's reply means. A plain save and a shared commit read replies alike."""

from __future__ import annotations

import logging
from typing import Any

import attrs

from prism_core.stores import CheckpointLimitError, CheckpointRecord, SaveRequest, conflict

__all__ = ("SaveCall",)

logger = logging.getLogger(__package__ or __name__)


@attrs.frozen
class SaveCall:
    """One save as the keys and arguments of ``CHECKPOINT_SAVE``, and what its reply means."""

    keys: list[str | bytes]
    args: list[str | bytes]
    request: SaveRequest
    stored_value: Any
    max_records: int | None

    def record(self, reply: str) -> CheckpointRecord:
        """The saved record for the script's ``reply``, or the refusal it names."""
        request = self.request
        outcome, _, times = reply.partition(" ")
        if outcome == "conflict":
            logger.debug(
                "checkpoint save %s/%s lost its conditional write", request.namespace, request.key
            )
            raise conflict(request.namespace, request.key)
        if outcome == "limit":
            raise CheckpointLimitError(
                f"this store holds at most {self.max_records} checkpoint records; delete "
                "finished ones or raise max_records"
            )
        created_at, _, updated_at = times.partition(" ")
        return CheckpointRecord(
            namespace=request.namespace,
            key=request.key,
            version=request.version,
            value=self.stored_value,
            metadata=request.metadata,
            ownership=request.ownership,
            fencing_token=request.fencing_token,
            category=request.category,
            created_at=float(created_at),
            updated_at=float(updated_at),
        )
