"""The key layout: collision-free record keys and index members in tuple order."""

from __future__ import annotations

import itertools

import pytest

from prism_core.stores import InvalidCheckpointError
from prism_store_redis._keys import (
    CheckpointKeys,
    decode_cursor,
    encode_cursor,
    index_member,
)

ALPHABET = ["", "a", ":", "\x00", "\x01", "\x02", "é", "\U0001d11e", "b:"]


def names() -> list[str]:
    """Every string of up to three symbols from :data:`ALPHABET` (non-empty)."""
    found = {"".join(p) for n in range(1, 4) for p in itertools.product(ALPHABET, repeat=n)}
    found.discard("")
    return sorted(found)


def test_index_members_sort_like_namespace_key_tuples() -> None:
    """Byte order of members equals Python's ``(namespace, key)`` order, with no duplicates."""
    sample = names()[:60]
    pairs = [(ns, key) for ns in sample for key in sample]
    members = [index_member(ns, key) for ns, key in pairs]
    assert len(set(members)) == len(pairs)
    assert sorted(pairs) == [pairs[i] for i in sorted(range(len(pairs)), key=members.__getitem__)]


def test_record_keys_do_not_collide() -> None:
    """Different ``(namespace, key)`` pairs never share a record key."""
    keys = CheckpointKeys("p")
    sample = names()
    pairs = [(ns, key) for ns in sample[:80] for key in sample[:80]]
    assert len({keys.record(ns, key) for ns, key in pairs}) == len(pairs)
    assert keys.record("a:b", "c") != keys.record("a", "b:c")
    assert keys.record("a:b", "c") == b"p:cp:3:a:b:c"


def test_namespace_range_holds_exactly_its_members() -> None:
    """The lex range of a namespace contains its members and no other namespace's."""
    sample = names()[:60]
    for ns in sample:
        low, high = CheckpointKeys.namespace_range(ns)
        for other in sample:
            member = index_member(other, "k")
            inside = low[1:] <= member < high[1:]
            assert inside == (other == ns), (ns, other)


def test_cursor_round_trip_and_forgeries() -> None:
    """A cursor gives back its member; strings the store did not issue are refused."""
    member = index_member("ns:\x00", "key:é")
    assert decode_cursor(encode_cursor(member)) == member
    for forged in ("", "r1.", "r1.AAAA", "r1.!!!", "r1.é", "x1." + encode_cursor(member)[3:]):
        with pytest.raises(InvalidCheckpointError):
            decode_cursor(forged)
