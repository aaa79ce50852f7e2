"""The built-in Prism guardrail packs.

Compose them explicitly with ``create_agent(plugins=[prism_packs.plugin])`` (or let the host
call ``discover_plugins()``), then enable them per session with
``agent.create_session(guardrail_packs=["destructive-commands", ...])``.
"""

from __future__ import annotations

from . import plugin
from .coding_standard import CODING_STANDARD
from .destructive_commands import DESTRUCTIVE_COMMANDS
from .secrets_hygiene import SECRETS_HYGIENE
from .validation_respect import VALIDATION_RESPECT

__all__ = (
    "BUILTIN_PACKS",
    "CODING_STANDARD",
    "DESTRUCTIVE_COMMANDS",
    "SECRETS_HYGIENE",
    "VALIDATION_RESPECT",
    "plugin",
)

#: The four packs the plugin declares, in declaration order.
BUILTIN_PACKS = (CODING_STANDARD, DESTRUCTIVE_COMMANDS, VALIDATION_RESPECT, SECRETS_HYGIENE)
