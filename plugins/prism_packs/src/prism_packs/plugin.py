"""The plugin object of ``prism-runtime-packs``: it registers the built-in packs, nothing else."""

from __future__ import annotations

from prism_core.guardrails import GuardrailPack
from prism_core.hookspecs import hookimpl

from .coding_standard import CODING_STANDARD
from .destructive_commands import DESTRUCTIVE_COMMANDS
from .secrets_hygiene import SECRETS_HYGIENE
from .validation_respect import VALIDATION_RESPECT

__all__ = ("prism_guardrail_packs",)


@hookimpl
def prism_guardrail_packs() -> tuple[GuardrailPack, ...]:
    """The four built-in packs."""
    return (CODING_STANDARD, DESTRUCTIVE_COMMANDS, VALIDATION_RESPECT, SECRETS_HYGIENE)
