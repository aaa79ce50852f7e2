"""The agent card the endpoint serves when the host gives none, built from the agent.

Its name is the agent's name, else its id; its description the agent's ``description``, else
its name (never its instructions: they are the model's, not the callers'); its version the
definition revision; it streams, and declares push notifications when the endpoint delivers
them; it declares the JSON-RPC interface at ``url`` twice, for A2A
1.0 (``SendMessage``, ...) and for 0.3 (``message/send``, ...), which the same route answers;
its input and output modes are exactly what the endpoint reads and writes. One skill stands
for the agent. A card of the host's own may declare no input mode the endpoint does not read.
"""

from __future__ import annotations

from typing import Any

from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

__all__ = ("MEDIA_TYPES", "check_input_modes", "default_agent_card")

#: What the endpoint reads and writes: text, and JSON data parts (a task's input, decisions,
#: pending calls).
MEDIA_TYPES = ("text/plain", "application/json")


def default_agent_card(
    agent: Any, *, url: str, version: str, push_notifications: bool = False
) -> AgentCard:
    """The card of ``agent`` served at ``url`` (``version``: the definition revision;
    ``push_notifications``: whether the endpoint delivers them)."""
    name = agent.name or agent.id
    if not isinstance(name, str) or not name:
        raise ValueError("the agent needs a name or an id for its agent card")
    described = getattr(agent, "description", None)
    description = described if isinstance(described, str) and described.strip() else name
    interfaces = [
        AgentInterface(
            url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=version_
        )
        for version_ in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
    ]
    skill = AgentSkill(
        id=agent.id or name,
        name=name,
        description=description,
        tags=["prism", "durable", "approvals"],
    )
    return AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=push_notifications),
        default_input_modes=list(MEDIA_TYPES),
        default_output_modes=list(MEDIA_TYPES),
        skills=[skill],
    )


def check_input_modes(card: AgentCard) -> None:
    """Refuse (``ValueError``) a card that declares an input mode the endpoint does not read:
    a caller trusting it would only meet ``ContentTypeNotSupportedError``."""
    declared = [*card.default_input_modes, *(m for s in card.skills for m in s.input_modes)]
    unread = sorted({mode for mode in declared if mode.strip().lower() not in MEDIA_TYPES})
    if unread:
        raise ValueError(
            f"the agent card declares input modes this endpoint does not read: {unread} "
            f"(it reads {', '.join(MEDIA_TYPES)})"
        )
