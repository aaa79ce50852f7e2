"""A tool's approval settings: whether a call needs a decision, by how many people, how long.

``needs_approval`` is ``True``/``False`` or a check ``(args, context) -> bool`` (sync or
async) asked once per call, before it is dispatched. A check fails closed: one that raises,
or answers anything but a ``bool``, holds the call for a person (the pending decision's
reason says why), and in a run that cannot suspend that is a refusal. A sync check runs on the
event loop, not in a worker thread: it is meant to be a quick look at the arguments (``amount >
100``); one that does I/O should be async.

``approvers`` (how many distinct people must allow a call) and ``approval_timeout_ms`` (how
long a decision may wait) are checked here when a tool is defined. It must not hold or
suspend a call: the tool round does.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

__all__ = (
    "MAX_APPROVAL_TIMEOUT_MS",
    "MAX_APPROVERS",
    "NeedsApproval",
    "ask_needs_approval",
    "check_approval_timeout",
    "check_approvers",
    "check_needs_approval",
    "needs_approval_material",
)

logger = logging.getLogger("prism_core.tools")

#: ``needs_approval``: a flag, or a check of one call's arguments and context.
NeedsApproval: TypeAlias = bool | Callable[[dict[str, Any], Any], Any]
#: Most distinct approvers a tool may ask for.
MAX_APPROVERS = 16
#: Longest ``approval_timeout_ms``: a year.
MAX_APPROVAL_TIMEOUT_MS = 366 * 86_400_000


def check_needs_approval(instance: Any, attribute: Any, value: Any) -> None:
    """``needs_approval`` must be a bool or a callable ``(args, context)``."""
    if isinstance(value, bool):
        return
    if not callable(value):
        raise TypeError(
            "needs_approval must be True, False or a callable (args, context) -> bool, got "
            f"{type(value).__name__}"
        )
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise TypeError(
            f"tool {instance.name!r}: needs_approval must accept (args, context) positionally"
        ) from None


def check_approvers(instance: Any, attribute: Any, value: Any) -> None:
    """``approvers`` must be an integer from 1 to :data:`MAX_APPROVERS`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"approvers must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_APPROVERS:
        raise ValueError(f"approvers must be from 1 to {MAX_APPROVERS}, got {value}")


def check_approval_timeout(instance: Any, attribute: Any, value: Any) -> None:
    """``approval_timeout_ms`` must be ``None`` or a positive integer up to a year."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"approval_timeout_ms must be an integer or None, got {type(value).__name__}"
        )
    if not 1 <= value <= MAX_APPROVAL_TIMEOUT_MS:
        raise ValueError(
            f"approval_timeout_ms must be from 1 to {MAX_APPROVAL_TIMEOUT_MS}, got {value}"
        )


def needs_approval_material(value: NeedsApproval) -> bool | str:
    """What the agent fingerprint records of ``needs_approval``: the flag, or ``"callable"``
    for a check (its code is not hashed; a revision bump marks a changed rule)."""
    return value if isinstance(value, bool) else "callable"


async def ask_needs_approval(
    tool_name: str, value: NeedsApproval, arguments: Mapping[str, Any], context: Any
) -> tuple[bool, str | None]:
    """Whether one call needs a decision, and why when the check itself failed.

    ``(False, None)``: it may run; ``(True, None)``: the check (or the flag) says so;
    ``(True, reason)``: the check raised or answered something that is not a ``bool``, so the
    call is held for a person (fail closed) and ``reason`` says that. Cancellation is never
    swallowed.
    """
    if isinstance(value, bool):
        return value, None
    try:
        answer = value(dict(arguments), context)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        logger.warning(
            "tool %s: the needs_approval check raised %s; the call is held for a decision",
            tool_name,
            type(exc).__name__,
        )
        return True, (
            f"Approval required: the needs_approval check of {tool_name} raised "
            f"{type(exc).__name__}, so a person decides"
        )
    if isinstance(answer, bool):
        return answer, None
    logger.warning(
        "tool %s: the needs_approval check answered %s, not a bool; the call is held",
        tool_name,
        type(answer).__name__,
    )
    return True, (
        f"Approval required: the needs_approval check of {tool_name} answered "
        f"{type(answer).__name__}, not True or False, so a person decides"
    )
