"""Compiled guardrail packs: the guards a session installs and the packs' state codec.

Owns ``CompiledGuardrailPacks`` (the guards, the normalised refs, the live pack state and how
refs and state ride a checkpoint: snapshot, bounds, all-or-nothing restore) and the
model-visible refusal text of a pack rule. It must not compile refs (``_packs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..codec import dumps, loads
from ..errors import GuardrailPackError
from ..redaction import Redactor
from ._decisions import GuardrailRecord
from ._engine import Guardrail, GuardrailConfig
from ._pack_model import MAX_PACK_REFUSAL_BYTES, PackInstance, bounded_json, default_reason, listing

__all__ = (
    "CompiledGuardrailPacks",
    "ask_decision_reason",
    "pack_refusal_message",
    "pack_rule_of",
    "rule_reason",
)


@attrs.frozen(eq=False)
class CompiledGuardrailPacks:
    """A session's packs, compiled: the guards to install and the packs' live state.

    ``tool_input`` holds one guard per rule (named ``pack:<pack>/<rule>``); ``tool_output``
    holds one allow-only observer per pack with an ``observe`` function (named
    ``pack-state:<pack>``). ``refs`` are the normalised refs, in order.
    """

    tool_input: tuple[Guardrail, ...]
    tool_output: tuple[Guardrail, ...]
    refs: tuple[Mapping[str, Any], ...]
    redactor: Redactor | None = attrs.field(default=None, repr=False)
    _instances: tuple[PackInstance, ...] = attrs.field(default=(), alias="instances", repr=False)

    @property
    def pack_ids(self) -> tuple[str, ...]:
        """The enabled packs' ids, in ref order."""
        return tuple(instance.pack.id for instance in self._instances)

    def config(self) -> GuardrailConfig:
        """The compiled guards as a :class:`GuardrailConfig` (observers are allow-only)."""
        return GuardrailConfig(tool_input=self.tool_input, tool_output=self.tool_output)

    def state_of(self, pack_id: str) -> Any:
        """The current state of pack ``pack_id``."""
        return self._instance(pack_id).state

    def persistable_refs(self) -> list[dict[str, Any]]:
        """The refs as JSON data that can ride a checkpoint and compile again on resume.

        Raises :class:`GuardrailPackError` naming the rule when an inline rule carries a
        ``deny`` predicate, which no checkpoint can hold.
        """
        for ref in self.refs:
            for rule in ref.get("rules", ()):
                if "deny" in rule:
                    raise GuardrailPackError(
                        f"guardrail pack {ref['id']!r} rule {rule['id']!r} has a deny predicate, "
                        "which cannot be saved in a checkpoint; use a pattern rule or ship the "
                        "pack from a plugin"
                    )
        result: list[dict[str, Any]] = loads(dumps(list(self.refs)))
        return result

    def snapshot_state(self) -> dict[str, Any]:
        """``{pack_id: snapshot}`` for every pack with a state codec.

        Raises :class:`GuardrailPackError` when a snapshot is not JSON or exceeds
        ``MAX_PACK_JSON_BYTES``.
        """
        snapshots: dict[str, Any] = {}
        for instance in self._instances:
            codec = instance.pack.state_codec
            if codec is None:
                continue
            where = f"guardrail pack {instance.pack.id!r}"
            try:
                data = codec.snapshot(instance.state)
            except Exception as exc:
                raise GuardrailPackError(f"{where}: state snapshot failed: {exc}") from exc
            snapshots[instance.pack.id] = bounded_json(data, f"{where} state snapshot")
        return snapshots

    def restore_state(self, snapshots: Mapping[str, Any]) -> None:
        """Reinstate states saved by :meth:`snapshot_state`; all or nothing.

        Raises :class:`GuardrailPackError` for a pack that is not enabled here, a pack
        without a state codec, oversized data, or data its codec refuses to parse.
        """
        if not isinstance(snapshots, Mapping):
            raise GuardrailPackError(
                f"guardrail pack state must be a mapping, got {type(snapshots).__name__}"
            )
        restored: list[tuple[PackInstance, Any]] = []
        for pack_id, data in snapshots.items():
            instance = self._instance(pack_id)
            codec = instance.pack.state_codec
            where = f"guardrail pack {pack_id!r}"
            if codec is None:
                raise GuardrailPackError(f"{where} has saved state but no state codec")
            data = bounded_json(data, f"{where} state")
            try:
                state = codec.parse(data)
            except Exception as exc:
                raise GuardrailPackError(f"{where}: malformed saved state: {exc}") from exc
            restored.append((instance, state))
        for instance, state in restored:
            instance.state = state

    def refusal_message(self, record: GuardrailRecord) -> str | None:
        """:func:`pack_refusal_message` with this compilation's redactor."""
        return pack_refusal_message(record, self.redactor)

    def _instance(self, pack_id: Any) -> PackInstance:
        for instance in self._instances:
            if instance.pack.id == pack_id:
                return instance
        raise GuardrailPackError(
            f"guardrail pack {pack_id!r} is not enabled in this session; enabled packs: "
            f"{listing(self.pack_ids)}"
        )


def pack_refusal_message(record: GuardrailRecord, redactor: Redactor | None = None) -> str | None:
    """The model-visible refusal for a record a pack rule produced, else ``None``.

    ``"Blocked by guardrail rule pack:<pack>/<rule>"``, followed by ``": <reason>"`` when
    the rule has a reason of its own. The text names the rule, never the call's arguments;
    it is redacted with ``redactor`` and then cut, on a character boundary, to at most
    ``MAX_PACK_REFUSAL_BYTES`` (200) UTF-8 bytes: that bound is the specification's.
    """
    metadata = record.metadata
    if record.action == "allow" or not isinstance(metadata, Mapping):
        return None
    pack, rule = metadata.get("pack"), metadata.get("rule")
    if not isinstance(pack, str) or not isinstance(rule, str):
        return None
    if record.guardrail != f"pack:{pack}/{rule}":
        return None
    message = f"Blocked by guardrail rule pack:{pack}/{rule}"
    if record.reason and record.reason != default_reason(pack, rule):
        message += f": {record.reason}"
    if redactor is not None:
        message = redactor.redact_text(message)
    # Dropping the bytes of a cut character keeps the prefix valid UTF-8.
    return message.encode("utf-8")[:MAX_PACK_REFUSAL_BYTES].decode("utf-8", errors="ignore")


def pack_rule_of(record: GuardrailRecord) -> dict[str, str] | None:
    """``{"pack", "rule"}`` when ``record`` came from a pack rule (``pack:<pack>/<rule>``)."""
    metadata = record.metadata
    if not isinstance(metadata, Mapping):
        return None
    pack, rule = metadata.get("pack"), metadata.get("rule")
    if not isinstance(pack, str) or not isinstance(rule, str):
        return None
    if record.guardrail != f"pack:{pack}/{rule}":
        return None
    return {"pack": pack, "rule": rule}


def rule_reason(record: GuardrailRecord) -> str | None:
    """A pack rule's own reason (``None`` for a rule that gives none, or for a host guard,
    whose reason may quote what it checked)."""
    rule = pack_rule_of(record)
    if rule is None or not record.reason:
        return None
    if record.reason == default_reason(rule["pack"], rule["rule"]):
        return None
    return record.reason


def ask_decision_reason(record: GuardrailRecord) -> str:
    """The pending decision's reason for a guard that asked:
    ``"Approval required by guardrail rule <name>: <reason>"`` (``": <reason>"`` only when the
    guard gave a reason of its own), cut on a character boundary to ``MAX_PACK_REFUSAL_BYTES``
    (200) UTF-8 bytes. It is redacted with the run's redactor when it is stored."""
    line = f"Approval required by guardrail rule {record.guardrail}"
    rule = pack_rule_of(record)
    own = record.reason
    if rule is not None and own == default_reason(rule["pack"], rule["rule"]):
        own = None
    text = f"{line}: {own}" if own else line
    return text.encode("utf-8")[:MAX_PACK_REFUSAL_BYTES].decode("utf-8", errors="ignore")
