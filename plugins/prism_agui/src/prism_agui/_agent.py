"""The host's agent, made ready to run one caller's durable runs on the app's stores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from prism_core import CheckpointStore, RunStateOptions

from ._errors import AccessDenied

__all__ = ("AgentFactory",)

#: Durable options the app sets itself, whatever the agent's ``run_state`` says.
_APP_OWNED = frozenset(
    {
        "checkpoints",
        "definition_revision",
        "checkpoint_policy",
        "ownership",
        "fencing_token",
    }
)


def _host_options(configured: Any) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The host's own durable options (``interrupt_before_tool``, session state, metadata,
    lease) and the ownership its ``run_state`` names, if any."""
    if configured is None:
        return {}, None
    if isinstance(configured, RunStateOptions):
        data = attrs.asdict(configured, recurse=False)
    elif isinstance(configured, Mapping):
        data = dict(configured)
    else:
        raise TypeError("the agent's run_state must be RunStateOptions or a mapping")
    ownership = data.get("ownership")
    options = {k: v for k, v in data.items() if k not in _APP_OWNED}
    return options, dict(ownership) if ownership else None


class AgentFactory:
    """Copies of the host's agent on the app's session store whose ``run_state`` makes every
    run durable: every-turn checkpoints on the app's store, its revision, the caller's scope.
    """

    def __init__(
        self, agent: Any, *, checkpoints: CheckpointStore, sessions: Any, revision: str
    ) -> None:
        if not isinstance(revision, str) or not revision.strip():
            raise ValueError("definition_revision must be a non-empty string")
        self.agent = agent
        self.checkpoints = checkpoints
        self.sessions = sessions
        self.revision = revision
        self._options, self._ownership = _host_options(agent.run_state)
        # Built once now, so an option RunStateOptions does not take fails at create_agui_app,
        # not per request (the core validates the values when a run starts).
        RunStateOptions(checkpoints, revision, **self._options)

    def check_caller(self, scope: dict[str, str] | None) -> None:
        """:class:`AccessDenied` when the agent's own ``run_state`` names another owner."""
        if self._ownership is not None and self._ownership != (scope or None):
            raise AccessDenied("this agent runs for another owner")

    def for_caller(self, scope: dict[str, str] | None) -> Any:
        """A copy of the agent for the caller with ``scope`` (see :meth:`check_caller`)."""
        self.check_caller(scope)
        return self.agent.evolve(
            store=self.sessions,
            run_state=RunStateOptions(
                self.checkpoints,
                self.revision,
                **self._options,
                checkpoint_policy="every-turn",
                ownership=scope,
            ),
        )

    @property
    def redactor(self) -> Any:
        """The agent's redactor (``None`` without one)."""
        return getattr(self.agent, "redactor", None)
