"""``create_a2a_app``: the a2a-sdk's Starlette routes over one Prism agent's durable runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.routes import create_jsonrpc_routes
from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.middleware import Middleware

from prism_core import StorePair
from prism_web import DEFAULT_MAX_BODY_BYTES, check_max_body_bytes, store_pair

from ._access import Authorize, Gate, ScopedContextBuilder, a2a_authorize, default_token
from ._card import check_input_modes, default_agent_card
from ._discovery import card_routes
from ._executor import PrismAgentExecutor
from ._handler import PrismRequestHandler
from ._push import A2APushNotifier, CheckpointPushConfigStore, PushConfigs
from ._requests import PrismRequestContextBuilder
from ._runs import PrismRuns
from ._tasks import CheckpointTaskStore

__all__ = ("INTERRUPTED_TASK_TIMEOUT_S", "RPC_PATH", "create_a2a_app")

#: Where the JSON-RPC route is served (the card is at ``/.well-known/agent-card.json``).
RPC_PATH = "/"
#: Seconds after which the SDK lets go of its in-memory task of a run that waits for input
#: (the next message reads it back from the checkpoint store).
INTERRUPTED_TASK_TIMEOUT_S = 300.0


def create_a2a_app(
    agent: Any,
    stores: StorePair | None = None,
    *,
    definition_revision: str,
    checkpoints: Any = None,
    sessions: Any = None,
    url: str,
    agent_card: AgentCard | None = None,
    authorize: Authorize | None = None,
    interrupt_before_tool: bool = False,
    restore_hooks: Sequence[Any] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 1,
    lease_ms: int = 30000,
    notifiers: Sequence[Any] = (),
    push_notifications: bool = True,
) -> Starlette:
    """An ASGI app serving ``agent`` over A2A: its card at ``/.well-known/agent-card.json`` and
    JSON-RPC at ``/``: the A2A 1.0 methods ``SendMessage``, ``SendStreamingMessage``,
    ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask`` and the task push-config
    methods, and 0.3's ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
    ``tasks/resubscribe`` and ``tasks/pushNotificationConfig/set|get|list|delete``.

    Each task is a durable run of ``agent`` (task id = run id, ``contextId`` = session id) on
    ``stores`` (a :class:`~prism_core.StorePair`; the ``checkpoints=`` and ``sessions=``
    keywords are still taken instead), the agent hosted for the caller
    (:meth:`~prism_core.Agent.hosted`: every-turn checkpoints under the caller's ownership; the
    agent keeps the rest of its own ``run_state``); ``definition_revision`` is the agent's
    revision, as for ``RunStateOptions``. ``url`` is
    where callers reach the JSON-RPC route (it goes into the card). ``agent_card`` replaces
    the card built from the agent (which is described by ``agent.description``, never by its
    instructions); it may declare no input mode but ``text/plain`` and ``application/json``.

    ``authorize(request)`` (sync or async) returns the caller: a
    :class:`~prism_core.Principal`, an ownership mapping (``{}`` for the unscoped tenant),
    ``None`` for HTTP 401, or raises :class:`~prism_a2a.AccessDenied` for 403; every task is
    kept under its caller's ownership, names the caller's actor as its starter, and every
    decision (a ``decisions`` message, a cancel) is audited with the caller's actor and the
    ``"a2a"`` channel. The default takes the bearer token in ``PRISM_A2A_TOKEN`` and, without
    one, serves this machine only; its callers are all ``DEFAULT_OWNERSHIP``. A body larger
    than ``max_body_bytes`` (1 MiB) is refused (413) without being read further.
    ``interrupt_before_tool=True`` makes every tool call wait for a decision;
    ``restore_hooks`` run on every claim.

    The requests only decide and watch: a new task's run runs in a task of the app's own, a
    ``decisions`` message is recorded (``decide_agent_run``) and run by the app's ``workers``
    (started with its first request or its lifespan; ``0``: none, any other worker on the same
    stores runs it), each claim under a ``lease_ms`` lease; every stream observes the run, so
    a client that goes away stops watching and the run goes on to its next stop.

    ``push_notifications`` (default on) serves the task push-config methods and declares
    ``pushNotifications`` in the card: configs are kept in the checkpoint store and every
    state change of a task with one is delivered to it through the stores' outbox
    (:class:`~prism_a2a.A2APushNotifier`). ``notifiers`` (e.g.
    :class:`~prism_core.WebhookNotifier`) get the same notifications. With either, the runs
    the app starts notify, and the app's workers (or, with ``workers=0``, a deliverer of its
    own) deliver the stores' notifications.
    """
    if authorize is not None and not callable(authorize):
        raise TypeError("authorize must be callable(request)")
    if not isinstance(url, str) or not url:
        raise ValueError("url must be the address callers reach the JSON-RPC route at")
    if agent_card is not None and not isinstance(agent_card, AgentCard):
        raise TypeError("agent_card must be an a2a.types.AgentCard")
    if agent_card is not None:
        check_input_modes(agent_card)
    check_max_body_bytes(max_body_bytes)
    if not isinstance(push_notifications, bool):
        raise TypeError("push_notifications must be a bool")
    pair = store_pair(stores, checkpoints=checkpoints, sessions=sessions)
    push = PushConfigs(pair.checkpoints) if push_notifications else None
    if isinstance(notifiers, str | bytes):
        raise TypeError("notifiers must be a sequence of notifiers")
    pushing = [A2APushNotifier(pair.checkpoints, configs=push)] if push is not None else []
    chosen = [*notifiers, *pushing]
    runs = PrismRuns(
        agent,
        definition_revision=definition_revision,
        stores=pair,
        interrupt_before_tool=interrupt_before_tool,
        restore_hooks=restore_hooks,
        workers=workers,
        lease_ms=lease_ms,
        notifiers=chosen,
    )
    card = agent_card or default_agent_card(
        agent, url=url, version=definition_revision, push_notifications=push_notifications
    )
    if card.capabilities.push_notifications and not push_notifications:
        raise ValueError("the agent card declares push notifications; this app serves none")
    handler = PrismRequestHandler(
        runs=runs,
        agent_executor=PrismAgentExecutor(pair.checkpoints, pair.sessions),
        task_store=CheckpointTaskStore(runs),
        agent_card=card,
        push_config_store=CheckpointPushConfigStore(push) if push is not None else None,
        request_context_builder=PrismRequestContextBuilder(runs, push),
        interrupted_task_timeout=INTERRUPTED_TASK_TIMEOUT_S,
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        runs.workers.ensure_started()
        try:
            yield
        finally:
            try:
                await handler.aclose()
            finally:
                await runs.aclose()

    routes = [
        *card_routes(card),
        *create_jsonrpc_routes(
            handler, RPC_PATH, context_builder=ScopedContextBuilder(), enable_v0_3_compat=True
        ),
    ]
    gate = Middleware(
        Gate,
        authorize=authorize or a2a_authorize(default_token()),
        runs=runs,
        max_body_bytes=max_body_bytes,
    )
    app = Starlette(routes=routes, middleware=[gate], lifespan=lifespan)
    app.state.prism_a2a = runs
    return app
