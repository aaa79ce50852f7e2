"""The result of a run, as ``run()`` returns it and ``AgentRunError.result`` carries it."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

from .content import ContentBlock, ErrorInfo, Message, Usage
from .limits import RunLimitBreach

__all__ = ("AgentRunResult", "RunStatus")

RunStatus: TypeAlias = Literal["succeeded", "failed", "aborted", "suspended", "denied"]


@attrs.frozen(kw_only=True)
class AgentRunResult:
    """How a run ended.

    ``text``/``content``/``message`` are the final assistant message; ``error`` and
    ``abort_reason`` are set for failed and aborted runs; ``limit`` names a crossed run
    limit; ``interruption`` and ``run_state`` belong to durable runs. ``stop_reason`` is set
    only for a run stopped on purpose (``"host_policy"``, ``"turn_limit"``,
    ``"hook_limit"``), with ``stop_detail`` (a policy's reason, ``"max_turns"``).
    """

    session_id: str
    run_id: str
    status: RunStatus
    text: str = ""
    content: tuple[ContentBlock, ...] = ()
    message: Message | None = None
    usage: Usage | None = None
    leaf_id: str | None = None
    error: ErrorInfo | None = None
    abort_reason: Any = None
    interruption: Any = None
    run_state: Any = None
    stop_reason: str | None = None
    stop_detail: str | None = None
    limit: RunLimitBreach | None = None
    #: The validated final answer of a run with an ``output_type`` (an instance for classes);
    #: ``None`` without one, or when the run did not succeed.
    output: Any = None
