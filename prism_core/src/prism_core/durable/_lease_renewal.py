"""Lease renewal in place: a fresh expiry without a new version.

An optional capability of a checkpoint store. A leased run renews its lease while a long model
call or tool runs (see :mod:`._lease`); a store that offers ``renew_lease`` rewrites the run's
stored value at its current version, so the renewal changes neither the version a host or an
operator last read nor anything else they compare against. A store without it still works:
the renewal falls back to an ordinary ``save``, which bumps the version.

Rules every implementation follows (``prism_core.testing.LeaseRenewalConformance`` checks
them):

- The value is validated like a ``save``'s (the same errors, before any I/O).
- It is written only if the record exists at exactly ``version``, under the same owner, and
  ``fencing_token`` is not below the stored one (the fencing rule of ``save``); otherwise
  :class:`~prism_core.CheckpointConflictError`, and nothing changes.
- The version, fencing token, metadata, category and creation time stay as they are; the
  value and the update time change. The caller never changes the value's indexed status (a
  renewal is only for a ``running`` run), so a status index stays exact.

It declares the capability only; it must not hold behaviour (the writer renews).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ("LeaseRenewalStore",)


@runtime_checkable
class LeaseRenewalStore(Protocol):
    """A checkpoint store that can rewrite a record's value without a new version."""

    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version`` (the rules above); raise
        :class:`~prism_core.CheckpointConflictError` when the record moved on."""
        ...
