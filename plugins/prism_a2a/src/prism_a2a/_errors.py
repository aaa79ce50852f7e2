"""Refusals: the endpoint's own errors, and how any Prism refusal becomes an A2A error.

A refusal raised while a JSON-RPC request is handled reaches the caller as the a2a-sdk's
JSON-RPC error, with the Prism ``code`` in its data (and at the start of its message). A
refusal before the JSON-RPC layer (the caller, the body: the web layer's table, whose
``NotAuthenticated``, ``AccessDenied`` and ``UnsupportedMediaType`` are exported here) is an
HTTP status with a JSON-RPC error object naming the code (see :mod:`._access`).
"""

from __future__ import annotations

from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from prism_core import (
    AgentDecisionError,
    AgentRunNotFoundError,
    AgentRunStateError,
    CheckpointConflictError,
    CheckpointRestoreError,
    PrismError,
)
from prism_web import Forbidden as AccessDenied
from prism_web import NotAuthenticated, UnsupportedMediaType

__all__ = (
    "A2AEndpointError",
    "AccessDenied",
    "ContentTypeRefused",
    "ContextRefused",
    "InputRefused",
    "ListTooLarge",
    "NotAuthenticated",
    "NotCancelable",
    "PushConfigRefused",
    "PushDeliveryError",
    "TaskNotFound",
    "UnsupportedMediaType",
    "a2a_error",
)


class A2AEndpointError(PrismError):
    """A request the A2A endpoint refuses before the kernel sees it."""

    code = "ERR_PRISM_A2A"
    status = 400


class InputRefused(A2AEndpointError):
    """A message the task cannot take: a new task without any input (or with a ``decisions``
    batch, which belongs on the task that waits for it), or a message on a task that waits
    for decisions without a ``decisions`` data part."""

    code = "ERR_PRISM_A2A_INPUT"


class ContentTypeRefused(A2AEndpointError):
    """A message part whose media type the agent does not read (anything but ``text/plain``
    text and ``application/json`` data): A2A's ``ContentTypeNotSupportedError``."""

    code = "ERR_PRISM_A2A_CONTENT_TYPE"


class ListTooLarge(A2AEndpointError):
    """``ListTasks`` over more of the caller's runs than one listing reads: narrow it with
    ``status`` or ask the host (``prism runs list``)."""

    code = "ERR_PRISM_A2A_LIST_LIMIT"


class ContextRefused(A2AEndpointError):
    """A ``contextId`` that is unknown to the caller, or whose previous task still runs or
    waits for input."""

    code = "ERR_PRISM_A2A_CONTEXT"


class TaskNotFound(A2AEndpointError):
    """No task with that id in the caller's scope (absent and foreign tasks look the same)."""

    code = "ERR_PRISM_A2A_TASK_NOT_FOUND"


class NotCancelable(A2AEndpointError):
    """``tasks/cancel`` on a task that is not waiting for input: only a suspended run is
    denied; a working or finished one is left as it is."""

    code = "ERR_PRISM_A2A_NOT_CANCELABLE"


class PushConfigRefused(A2AEndpointError):
    """A push notification config the endpoint will not keep: too large, too many for one
    task, or a URL that is not ``http``/``https`` with a host (or carries credentials)."""

    code = "ERR_PRISM_A2A_PUSH_CONFIG"


class PushDeliveryError(PrismError):
    """A task's push receiver did not take an update (no answer, or not 2xx); the deliverer
    tries the notification again later."""

    code = "ERR_PRISM_A2A_PUSH_DELIVERY"


def _described(exc: PrismError) -> tuple[str, dict[str, str]]:
    return f"{exc.code}: {exc}", {"code": exc.code}


def a2a_error(exc: PrismError) -> A2AError:
    """The a2a-sdk error a Prism refusal is answered with (its ``data`` names the code).

    Malformed or unanswerable decisions are invalid params; a part of a media type the agent
    does not read is a content type not supported; a task that is absent or foreign is not
    found; a message on a task that does not wait (a finished one, a working one), a lost race,
    a failed restore or a listing too large is an operation the task does not support now;
    anything else is an internal error.
    """
    message, data = _described(exc)
    if isinstance(exc, TaskNotFound | AgentRunNotFoundError):
        return TaskNotFoundError(message, data=data)
    if isinstance(exc, ContentTypeRefused):
        return ContentTypeNotSupportedError(message, data=data)
    if isinstance(exc, ListTooLarge):
        return UnsupportedOperationError(message, data=data)
    if isinstance(exc, NotCancelable):
        return TaskNotCancelableError(message, data=data)
    if isinstance(exc, AgentDecisionError | InputRefused | ContextRefused | PushConfigRefused):
        return InvalidParamsError(message, data=data)
    if isinstance(exc, AgentRunStateError | CheckpointConflictError | CheckpointRestoreError):
        return UnsupportedOperationError(message, data=data)
    return InternalError(message, data=data)
