"""How a run's phases stop it: the internal exceptions the run generator turns into terminals.

Owns ``AbortRequested``, ``RunSuspended`` and ``RunFailure``. It raises nothing itself and
must not
touch run state; :mod:`._terminals` decides what each one ends as.
"""

from __future__ import annotations

from ..content import ErrorInfo
from ..durable import Interruption
from ..guardrails import GuardrailRecord
from ..limits import RunLimitBreach

__all__ = ("AbortRequested", "RunFailure", "RunSuspended")


class AbortRequested(Exception):
    """Internal: the run's signal fired at a boundary where no cancellation was pending."""


class RunSuspended(Exception):
    """Internal: a durable run suspended with ``interruption`` (its checkpoint is written)."""

    def __init__(self, interruption: Interruption) -> None:
        super().__init__("suspended")
        self.interruption = interruption


class RunFailure(Exception):
    """Internal: the run fails with ``error`` (and maybe a crossed ``limit``)."""

    def __init__(
        self,
        error: ErrorInfo,
        *,
        limit: RunLimitBreach | None = None,
        cause: BaseException | None = None,
        record: GuardrailRecord | None = None,
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.limit = limit
        self.cause = cause
        self.record = record
