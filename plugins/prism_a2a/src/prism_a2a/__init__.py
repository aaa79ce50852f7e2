"""Durable Prism runs as A2A tasks, on the official ``a2a-sdk``.

``create_a2a_app(agent, definition_revision=..., checkpoints=..., sessions=..., url=...)``
serves the agent card at ``/.well-known/agent-card.json`` and A2A JSON-RPC at ``/``: a task is
a durable run (task id = run id, ``contextId`` = session id), a suspension is
``input-required`` with the pending decisions as a data part, a ``decisions`` data part resumes
it (recorded, then run by the app's workers), ``CancelTask`` denies it, ``ListTasks`` lists
the caller's tasks, and a task's push configs get its state changes through the stores' outbox.
"""

from __future__ import annotations

from ._access import DEFAULT_OWNERSHIP, TOKEN_ENV, loopback_only
from ._app import INTERRUPTED_TASK_TIMEOUT_S, RPC_PATH, create_a2a_app
from ._card import MEDIA_TYPES, default_agent_card
from ._contexts import CONTEXT_NAMESPACE
from ._discovery import CARD_MAX_AGE_S
from ._errors import (
    A2AEndpointError,
    AccessDenied,
    ContentTypeRefused,
    ContextRefused,
    InputRefused,
    ListTooLarge,
    NotAuthenticated,
    NotCancelable,
    PushConfigRefused,
    PushDeliveryError,
    TaskNotFound,
    UnsupportedMediaType,
)
from ._listing import MAX_LISTED_RUNS
from ._push import (
    MAX_PUSH_CONFIG_BYTES,
    MAX_PUSH_CONFIGS,
    PUSH_NAMESPACE,
    A2APushNotifier,
    push_payload,
)
from ._views import ANSWER_ARTIFACT_ID, TASK_STATES

__all__ = (
    "ANSWER_ARTIFACT_ID",
    "CARD_MAX_AGE_S",
    "CONTEXT_NAMESPACE",
    "DEFAULT_OWNERSHIP",
    "INTERRUPTED_TASK_TIMEOUT_S",
    "MAX_LISTED_RUNS",
    "MAX_PUSH_CONFIGS",
    "MAX_PUSH_CONFIG_BYTES",
    "PUSH_NAMESPACE",
    "MEDIA_TYPES",
    "RPC_PATH",
    "TASK_STATES",
    "TOKEN_ENV",
    "A2AEndpointError",
    "A2APushNotifier",
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
    "create_a2a_app",
    "default_agent_card",
    "loopback_only",
    "push_payload",
)
