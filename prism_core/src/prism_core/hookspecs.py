"""The pluggy hook specifications of Prism (project name ``"prism"``).

Hooks are synchronous factories: they return objects, and async behaviour lives on those
objects. An ``async def`` hookimpl is rejected when its plugin is registered. The return
annotations say what each hook answers; the ones the kernel checks duck-typed (loop
strategies, restore hooks, middleware) are typed as the sequences they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .durable._checkpoints import CheckpointStore
    from .durable._pair import StorePair
    from .guardrails import GuardrailPack
    from .models import ModelConfig
    from .providers import AIProvider
    from .records import SessionStore

__all__ = ("PROJECT_NAME", "hookimpl", "hookspec")

PROJECT_NAME = "prism"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(firstresult=True)
def prism_checkpoint_store(url: str, create: bool) -> CheckpointStore | None:
    """Open a checkpoint store for ``url``.

    Called by ``open_checkpoint_store(url, plugins=...)``, in registration order, until one
    plugin answers. ``url`` is the store URL as the host wrote it (``sqlite:///run.db``,
    ``postgresql://…``, ``redis://…``). Return a ``CheckpointStore``, or ``None`` when the
    URL's scheme is not this plugin's.
    ``create`` is ``False`` when the caller must not create anything (``prism runs``): the
    store then refuses, on first use and writing nothing, a database or tables that do not
    exist. An implementation may leave the argument out of its signature (stores without a
    schema, such as Redis, have nothing to create).
    """


@hookspec(firstresult=True)
def prism_session_store(url: str, create: bool) -> SessionStore | None:
    """Open a session store for ``url``.

    Called by ``open_session_store(url, plugins=...)`` until one plugin answers. ``url`` is
    the store URL as written by the host. Return a ``SessionStore``, or ``None`` when the
    scheme is not this plugin's.
    ``create`` is ``False`` when the caller must not create anything (``prism runs``): the
    store then refuses, on first use and writing nothing, a database or tables that do not
    exist. An implementation may leave the argument out of its signature (stores without a
    schema, such as Redis, have nothing to create).
    """


@hookspec(firstresult=True)
def prism_open_stores(url: str) -> StorePair | None:
    """Open a checkpoint store and a session store for ``url``, as a pair.

    Called by ``open_stores(url, plugins=...)`` (and so by ``prism runs``, ``prism serve``,
    the Celery tasks and the demo) until one plugin answers. ``url`` is the store URL as the
    host wrote it. Return a ``prism_core.stores.StorePair`` whose two stores share one
    connection (or engine, or client) and commit a durable turn together, or ``None`` when
    the URL's scheme is not this plugin's; ``open_stores`` then falls back to the two
    single-store hooks.
    The stores connect to nothing until their first use. A store that creates its database
    or tables on first use offers ``prism_core.stores.CreatesOnFirstUse``: when the caller
    must not create anything (``open_stores(url, create=False)``, as ``prism runs`` does),
    the kernel calls its ``create_nothing()`` before handing the pair over, and the store
    then refuses, on first use and writing nothing, a database or tables that do not exist.
    """


@hookspec(firstresult=True)
def prism_provider(model: ModelConfig) -> AIProvider | None:
    """Provide the model provider for ``model``.

    Called at the start of each run whose agent has neither ``provider`` nor a
    ``provider_source`` that answered. ``model`` is the run's ``ModelConfig``; match on
    ``model.provider``. Return an ``AIProvider``, or ``None`` when the provider id is not
    this plugin's.
    """


@hookspec
def prism_guardrail_packs() -> Sequence[GuardrailPack] | None:
    """Declare guardrail packs.

    Called once per agent, when the agent is created, to build the pack catalogue that
    session ``guardrail_packs=[…]`` ids resolve against. Receives nothing. Return a sequence
    of ``GuardrailPack`` definitions; ``None`` (or an empty sequence) declares none.
    """


@hookspec
def prism_loop_strategies() -> Sequence[Any] | None:
    """Declare loop strategies by name.

    Called once per agent, when the agent is created. Receives nothing. Return a sequence of
    ``AgentLoopStrategy`` objects (each has a ``name`` and a ``revision``); ``None`` declares
    none.
    """


@hookspec
def prism_restore_hooks() -> Sequence[Any] | None:
    """Declare restore hooks that run on every claiming resume of this host.

    Called once per lifecycle or resume that composes the plugins. Receives nothing. Return a
    sequence of restore hooks (callables or objects with ``id``/``restore``); ``None``
    declares none.
    """


@hookspec
def prism_middleware() -> Sequence[object] | None:
    """Declare middleware objects.

    Called once per agent, when the agent is created. Receives nothing. Return a sequence of
    middleware objects (methods named after middleware points such as ``session_start``,
    ``provider_request``, ``tool_call``, or the observer points ``event`` and
    ``checkpoint_written``, see :mod:`prism_core.middleware`); they run after the agent's own
    ``middleware`` in plugin registration order. ``None`` declares none.
    """


@hookspec
def prism_notifiers() -> Sequence[Any] | None:
    """Declare notifiers: where a durable run's notifications go besides the host's own.

    Called once per host that delivers notifications from the plugins it is given (``prism
    serve`` and ``prism worker`` ask the plugins installed under the entry-point group
    ``prism.notifiers``; a host asks ``PluginHost(plugins).notifiers()`` and passes them as
    ``notifiers=``). Receives nothing. Return a sequence of notifier objects, each with an
    ``async deliver(notification)`` that raises to have the notification retried (and, if it
    wants, ``events`` and a stable ``name``; see ``prism_core.Notifier``); ``None`` declares
    none.
    """
