"""Callers: who is asking, on which door, and which runs they may see and decide.

A :class:`Principal` is what every face (the CLI, the HTTP API and console, AG-UI, A2A, the
workers) turns its caller into before it touches a run. Its ``ownership`` is the scope runs are
matched against; its ``actor`` names the person or service and is never part of that match, so
a team's runs can be decided by any of its people and each decision names who. It is a value
only: it must not read a store or a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ._error_base import PrismError

__all__ = (
    "CHANNELS",
    "KERNEL_ACTOR",
    "KERNEL_CHANNEL",
    "MAX_ACTOR_BYTES",
    "MAX_CHANNEL_CHARS",
    "InvalidPrincipalError",
    "Principal",
    "check_actor",
    "check_channel",
    "coerce_principal",
)

#: Largest ``actor``, in UTF-8 bytes.
MAX_ACTOR_BYTES = 256
#: Longest ``channel``, in characters.
MAX_CHANNEL_CHARS = 32
#: The channels Prism's own faces record (a host may name its own, see :func:`check_channel`).
CHANNELS = ("cli", "console", "api", "agui", "a2a", "celery", "worker", "kernel", "host")
#: Who the kernel's own settlements name: an idempotent call settled by a continue, a tool's
#: ``reconcile``, an expired decision.
KERNEL_ACTOR = "prism"
KERNEL_CHANNEL = "kernel"

_CHANNEL = re.compile(r"[a-z][a-z0-9_.-]*")
_OWNERSHIP_ACTOR_KEYS = ("actor", "sub")


class InvalidPrincipalError(PrismError, ValueError):
    """A principal's ownership, actor or channel is malformed (raised before any run is read)."""

    code = "ERR_PRISM_PRINCIPAL_INVALID"


def check_actor(value: Any, *, where: str = "actor") -> str | None:
    """``value`` as an actor: ``None``, or a non-empty string of at most 256 UTF-8 bytes with
    no NUL; anything else is an :class:`InvalidPrincipalError` naming ``where``."""
    if value is None:
        return None
    if type(value) is not str or not value:
        raise InvalidPrincipalError(f"{where} must be a non-empty string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPrincipalError(f"{where} must be valid UTF-8 text") from None
    if size > MAX_ACTOR_BYTES:
        raise InvalidPrincipalError(f"{where} must be at most {MAX_ACTOR_BYTES} UTF-8 bytes")
    if "\x00" in value:
        raise InvalidPrincipalError(f"{where} must not contain NUL")
    return value


def check_channel(value: Any, *, where: str = "channel") -> str:
    """``value`` as a channel: lower-case ASCII letters, digits, ``_``, ``.`` and ``-``,
    starting with a letter, at most 32 characters."""
    if type(value) is not str or len(value) > MAX_CHANNEL_CHARS or not _CHANNEL.fullmatch(value):
        raise InvalidPrincipalError(
            f"{where} must be 1-{MAX_CHANNEL_CHARS} characters of a-z, 0-9, '_', '.' and '-', "
            "starting with a letter"
        )
    return value


def _ownership(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidPrincipalError("ownership must be a mapping of strings to strings")
    items = dict(value)
    for key, item in items.items():
        if type(key) is not str or type(item) is not str:
            raise InvalidPrincipalError("ownership must be a mapping of strings to strings")
    return items


@attrs.frozen(kw_only=False)
class Principal:
    """A caller: ``ownership`` scopes which runs it may see and decide (matched exactly, as a
    store matches it; ``None`` and ``{}`` both mean the unscoped tenant), ``actor`` names the
    person or service (never matched; at most 256 UTF-8 bytes), ``channel`` the door it came
    through (``"cli"``, ``"console"``, ``"api"``, ``"agui"``, ``"a2a"``, ``"celery"``,
    ``"worker"``, ``"kernel"``, ``"host"``, or a host's own name).

    >>> Principal({"tenant_id": "acme"}, actor="ana@acme.test", channel="console").actor
    'ana@acme.test'
    """

    ownership: dict[str, str] | None = attrs.field(default=None, converter=_ownership)
    actor: str | None = attrs.field(default=None)
    channel: str = attrs.field(default="api")

    @actor.validator
    def _check_actor(self, _attribute: Any, value: Any) -> None:
        check_actor(value)

    @channel.validator
    def _check_channel(self, _attribute: Any, value: Any) -> None:
        check_channel(value)

    @property
    def scope(self) -> dict[str, str] | None:
        """The ownership a store matches (``None`` for the unscoped tenant, ``{}`` included)."""
        return dict(self.ownership) if self.ownership else None

    def with_channel(self, channel: str) -> Principal:
        """This caller on another door (for a face that forwards to another)."""
        return Principal(self.ownership, self.actor, channel)


def coerce_principal(value: Any, *, channel: str, default_actor: str | None = None) -> Principal:
    """What an ``authorize`` answered, as a :class:`Principal` on ``channel``.

    A :class:`Principal` is taken as it is (its own channel kept unless it left the default
    ``"api"`` and ``channel`` names another door). A mapping is an ownership scope, as before
    principals existed: its ``actor``, else ``sub``, key then names the actor and stays part of
    the ownership. ``default_actor`` names the actor when neither does (the CLI's OS user, the
    default token's ``"api"``). Anything else is an :class:`InvalidPrincipalError`; a ``None``
    answer is the face's to refuse (401) before calling this.
    """
    if isinstance(value, Principal):
        principal: Principal = value
        if principal.channel == "api" and channel != "api":
            principal = principal.with_channel(channel)
        if principal.actor is None and default_actor is not None:
            principal = Principal(principal.ownership, default_actor, principal.channel)
        return principal
    if not isinstance(value, Mapping):
        raise InvalidPrincipalError(
            "authorize must return a Principal, a dict[str, str] ownership or None, "
            f"not {type(value).__name__}"
        )
    ownership = _ownership(value)
    actor = default_actor
    for key in _OWNERSHIP_ACTOR_KEYS:
        named = (ownership or {}).get(key)
        if named:
            actor = named
            break
    return Principal(ownership=ownership or None, actor=actor, channel=channel)
