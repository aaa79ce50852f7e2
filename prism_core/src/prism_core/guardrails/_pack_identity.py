"""Pack identity: how a pack that cannot ride a checkpoint is recorded there and matched again.

An inline pack whose rule has a ``deny`` predicate (a callable) cannot be saved. Its checkpoint
row records its identity instead: ``{"id", "version", "digest", "host_supplied": true}``, the
digest being a SHA-256 of the pack's declarative part (every rule's id, tools, arg paths,
pattern, action and reason, and which rules have a predicate). On resume the host supplies the
pack again (``guardrail_packs=[...]``); :func:`reinstate_refs` puts each supplied ref back in
its recorded place when its id, version and digest match, and refuses otherwise, naming the
pack. Every other pack keeps riding the checkpoint as plain data.

It must not compile packs or evaluate rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..codec import dumps, loads
from ..errors import GuardrailPackError
from ._pack_state import CompiledGuardrailPacks

__all__ = ("checkpoint_rows", "declarative_digest", "has_predicate", "reinstate_refs")


def has_predicate(row: Mapping[str, Any]) -> bool:
    """Whether a normalised ref is an inline pack with a ``deny`` predicate."""
    return any("deny" in rule for rule in row.get("rules", ()))


def declarative_digest(row: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a normalised inline ref without its callables."""
    rules = [
        {key: (True if key == "deny" else value) for key, value in rule.items()}
        for rule in row.get("rules", ())
    ]
    data = dumps({"id": row["id"], "version": row.get("version", 1), "rules": rules})
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _identity(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "version": row.get("version", 1),
        "digest": declarative_digest(row),
        "host_supplied": True,
    }


def checkpoint_rows(packs: CompiledGuardrailPacks) -> list[dict[str, Any]]:
    """The refs as checkpoint rows: plain data, or an identity row for a predicate pack."""
    if not any(has_predicate(row) for row in packs.refs):
        return packs.persistable_refs()
    rows: list[dict[str, Any]] = []
    for row in packs.refs:
        if has_predicate(row):
            rows.append(_identity(row))
        else:
            rows.append(loads(dumps(row)))
    return rows


def reinstate_refs(
    rows: Sequence[Any], supplied: Sequence[Any], compile_one: Callable[[Any], Mapping[str, Any]]
) -> list[Any]:
    """The recorded ``rows`` with every identity row replaced by the host's matching ref.

    ``compile_one(ref)`` compiles one ref and returns its normalised row. Raises
    :class:`GuardrailPackError` naming a recorded pack the host did not supply, a supplied
    pack whose version or declarative part differs from the recorded one, and a supplied pack
    the checkpoint does not record.
    """
    by_id: dict[str, Any] = {}
    for ref in supplied:
        if not isinstance(ref, Mapping) or not isinstance(ref.get("id"), str):
            raise GuardrailPackError(
                "guardrail_packs on resume must be inline pack refs ({'id', 'version'?, 'rules'})"
            )
        if ref["id"] in by_id:
            raise GuardrailPackError(f"guardrail pack {ref['id']!r} is supplied twice")
        by_id[ref["id"]] = ref
    recorded = {
        row.get("id") for row in rows if isinstance(row, Mapping) and row.get("host_supplied")
    }
    extra = sorted(set(by_id) - recorded)
    if extra:
        raise GuardrailPackError(
            f"guardrail packs {extra} were supplied but the checkpoint does not record them"
        )
    result: list[Any] = []
    for row in rows:
        if not (isinstance(row, Mapping) and row.get("host_supplied")):
            result.append(row)
            continue
        pack_id = row.get("id")
        if pack_id not in by_id:
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r} has a deny predicate and must be supplied again on "
                "resume (guardrail_packs=[...]) with the same definition"
            )
        ref = by_id[pack_id]
        normalised = compile_one(ref)
        if normalised.get("version", 1) != row.get("version") or declarative_digest(
            normalised
        ) != row.get("digest"):
            raise GuardrailPackError(
                f"guardrail pack {pack_id!r} was supplied with a different version or "
                "definition than the checkpoint records"
            )
        result.append(ref)
    return result
