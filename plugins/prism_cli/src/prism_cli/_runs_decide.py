"""``prism runs approve|deny|continue``: record a decision, or run it here.

By default a decision is recorded (:meth:`~prism_core.AgentRunLifecycle.decide`) and the
command returns: no tool and no model turn runs in the operator's process, with the
operator's environment and credentials; a worker (``prism worker``, ``prism serve``, a Celery
worker) claims the run and runs it. ``--wait [SECONDS]`` then follows the run, a line per
checkpoint, until a worker has taken it to its next stop. ``--here`` runs it in this process
instead (the host's app entered for the run, as a worker would). ``--app`` may name a resolver
or an async context manager factory of one (``prism_core.entered_resolver``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from prism_core import (
    AgentRunStatus,
    StorePair,
    create_agent_run_lifecycle,
    entered_resolver,
    load_agent_run_state,
)

__all__ = ("DEFAULT_WAIT_SECONDS", "WaitTimeout", "settle")

#: How long ``--wait`` without a number follows a run.
DEFAULT_WAIT_SECONDS = 600.0
#: How often ``--wait`` reads the run (it starts fast, then backs off to this).
_MAX_POLL_SECONDS = 0.5


class WaitTimeout(Exception):
    """``--wait`` ran out of time with the run still running."""


async def settle(
    stores: StorePair,
    args: argparse.Namespace,
    owner: Mapping[str, str] | None,
    resume: dict[str, Any],
    resolve: Callable[..., Any],
    on_sessions: Callable[[Callable[..., Any], Any], Callable[..., Any]],
) -> int:
    """Record ``resume`` (or run it with ``--here``), print the outcome, and follow the run
    with ``--wait``."""
    ref = {"run_id": args.run_id}
    async with entered_resolver(resolve) as resolver:
        lifecycle = create_agent_run_lifecycle(
            checkpoints=stores.checkpoints, resolve_agent=on_sessions(resolver, stores.sessions)
        )
        if args.here:
            result = await lifecycle.resume(ref, resume, ownership=owner)
            version = result.run_state.version if result.run_state is not None else "-"
            print(f"run {result.run_id}: {result.status} (version {version})")
            if result.text:
                print(result.text)
            return 0
        status = await lifecycle.decide(ref, resume, ownership=owner)
    state = status.state
    print(f"run {state.run_id}: {args.runs_command} recorded at version {status.version}")
    if state.status != "running":
        print(f"run {state.run_id}: {state.status} (version {status.version})")
        return 0
    if args.wait is None:
        print(
            f"run {state.run_id}: waiting for a worker (prism worker --store URL --app "
            f"{args.app}); follow it with prism runs show {state.run_id}"
        )
        return 0
    return await follow(stores, state.run_id, owner, status, args.wait)


async def follow(
    stores: StorePair,
    run_id: str,
    owner: Mapping[str, str] | None,
    status: AgentRunStatus,
    seconds: float,
) -> int:
    """Print a line per new checkpoint of ``run_id`` until it is no longer ``running``;
    raise :class:`WaitTimeout` after ``seconds``."""
    seen = status.version
    pause = 0.02
    with anyio.move_on_after(seconds if math.isfinite(seconds) else None):
        while True:
            await anyio.sleep(pause)
            pause = min(pause * 2, _MAX_POLL_SECONDS)
            now = await load_agent_run_state(
                stores.checkpoints, {"run_id": run_id}, ownership=owner
            )
            if now is None:
                print(f"run {run_id}: gone")
                return 1
            if now.version == seen:
                continue
            seen, pause = now.version, 0.02
            print(f"run {run_id}: {now.state.status} (version {now.version})")
            if now.state.status != "running":
                return 0
    raise WaitTimeout(f"gave up waiting after {seconds:g} s; the run is still running")
