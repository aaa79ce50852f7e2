"""``secrets-hygiene``: refuse tool calls whose arguments carry secret material.

One pattern rule on every string of every tool call's arguments (keys included). The
alternatives are listed one per line so that adding a token format is a one-line change.
"""

from __future__ import annotations

from prism_core.guardrails import GuardrailPack, PackRule

__all__ = ("SECRETS_HYGIENE", "SECRET_PATTERNS")

#: One regex per kind of secret.
SECRET_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_-]{16,}",  # OpenAI-style API keys
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key ids
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",  # PEM private keys
    r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",  # JWTs
    r"\bxox[baprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
)

SECRETS_HYGIENE = GuardrailPack(
    id="secrets-hygiene",
    version=1,
    description="Refuses tool calls whose arguments carry API keys, tokens or private keys.",
    rules=(
        PackRule(
            id="no-secret-material-in-arguments",
            pattern="|".join(f"(?:{pattern})" for pattern in SECRET_PATTERNS),
            reason="Tool arguments must not carry secret material such as keys or tokens",
        ),
    ),
)
