"""The host's agents for a process that runs tools: a resolver, or a factory entered once.

``resolve_agent`` is either a resolver, called per run as ``resolve_agent(agent_id)`` (or
with ``revision=``, see :func:`~prism_core.call_resolve_agent`), or an async context manager
factory that yields one::

    @asynccontextmanager
    async def app():
        async with mcp_tools(MCPServerStdio("ledger-mcp")) as tools:
            yield lambda agent_id: (make_agent(tools), "v1")

A factory (a callable that takes no argument) is entered once, when the process that runs the
tools starts (a worker, ``prism serve``, ``prism runs … --here``), and left when it stops, so
MCP connections, HTTP clients and pools live as long as that process. It must not resolve
anything itself: the lifecycle and the workers call the resolver.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..errors import PrismError

__all__ = ("ResolverError", "entered_resolver", "is_resolver_factory")


class ResolverError(PrismError, TypeError):
    """``resolve_agent`` (or ``--app``) is neither a resolver nor a factory of one."""

    code = "ERR_PRISM_RESOLVER"


def is_resolver_factory(value: Callable[..., Any]) -> bool:
    """Whether ``value`` is a factory (callable with no argument) rather than a resolver
    (callable with an ``agent_id``)."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_any = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    return not required and not takes_any


@asynccontextmanager
async def entered_resolver(resolve_agent: Any) -> AsyncIterator[Callable[..., Any]]:
    """The resolver ``resolve_agent`` names: itself, or what its factory yields while this
    block is open (the factory's own context is left when the block ends)."""
    if not callable(resolve_agent):
        raise ResolverError(
            "resolve_agent must be callable(agent_id) or an async context manager factory "
            f"yielding one, not {type(resolve_agent).__name__}"
        )
    if not is_resolver_factory(resolve_agent):
        yield resolve_agent
        return
    manager = resolve_agent()
    if not (hasattr(manager, "__aenter__") and hasattr(manager, "__aexit__")):
        raise ResolverError(
            "a resolve_agent that takes no argument must return an async context manager "
            f"(an @asynccontextmanager factory), not {type(manager).__name__}"
        )
    async with manager as resolver:
        if not callable(resolver):
            raise ResolverError(
                f"the resolve_agent factory yielded {type(resolver).__name__}, not a "
                "callable(agent_id)"
            )
        yield resolver
