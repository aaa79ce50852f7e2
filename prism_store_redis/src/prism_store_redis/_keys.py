"""The Redis key layout both stores share (see ``docs/stores-redis.md``).

Every key starts with ``<prefix>:`` and a family name followed by ``:`` (or, for ``cpall``,
nothing), so no two families collide and ``SCAN <prefix>:*`` finds everything a store wrote.

Checkpoints:

- ``<prefix>:cp:<n>:<namespace>:<key>``: one hash per record. ``<n>`` is the namespace's
  length in UTF-8 bytes, so a ``:`` inside the namespace or key cannot make two records share
  a Redis key.
- ``<prefix>:cpidx:<owner>``: a sorted set per owner (``<owner>`` is the canonical JSON of the
  ownership map, empty for unowned records) whose members are :func:`index_member` values at
  score 0, so ``ZRANGEBYLEX`` walks one owner's records in ``(namespace, key)`` order.
- ``<prefix>:cpall``: a sorted set of every record key scored by when it expires (epoch
  milliseconds, ``+inf`` for records without a TTL); it counts live records for
  ``max_records`` without scanning.
- ``<prefix>:cpst:<n>:<status>:<owner>``: a sorted set per owner and status (``<n>`` is the
  status's length in UTF-8 bytes) holding the index members of that owner's records whose
  value has that top-level ``status``, at score 0, for ``list_by_status``.

Sessions: ``<prefix>:se:<entry_id>`` (one hash per entry), ``<prefix>:sl:<session_id>`` (the
entry ids in append order) and ``<prefix>:sh:<session_id>`` (the id appended last).
"""

from __future__ import annotations

import base64
import binascii
import re

from prism_core.codec import dumps
from prism_core.stores import InvalidCheckpointError

__all__ = (
    "CheckpointKeys",
    "SessionKeys",
    "decode_cursor",
    "encode_cursor",
    "index_member",
    "member_name",
)

_CURSOR_TAG = "r1."


def _escape(namespace: bytes) -> bytes:
    # Order-preserving escape that removes NUL, the separator between namespace and key:
    # 0x00 -> 0x01 0x01 and 0x01 -> 0x01 0x02 keep byte order, so index members sort exactly
    # like (namespace, key) tuples of Python strings.
    return namespace.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01")


def index_member(namespace: str, key: str) -> bytes:
    """The index member of a record: escaped namespace, NUL, key (UTF-8)."""
    return _escape(namespace.encode()) + b"\x00" + key.encode()


def member_name(member: bytes | str) -> tuple[str, str]:
    """The namespace and key an index member names, as text (for reports: bytes that are not
    UTF-8 show as replacement characters)."""
    raw = member if isinstance(member, bytes) else member.encode()
    escaped, _, key = raw.partition(b"\x00")
    namespace = re.sub(
        rb"\x01([\x01\x02])", lambda m: b"\x00" if m.group(1) == b"\x01" else b"\x01", escaped
    )
    return namespace.decode("utf-8", "replace"), key.decode("utf-8", "replace")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def encode_cursor(member: bytes) -> str:
    """An opaque ``list`` cursor that resumes after ``member``."""
    return _CURSOR_TAG + base64.urlsafe_b64encode(member).decode("ascii")


def decode_cursor(cursor: str) -> bytes:
    """The index member a cursor from :func:`encode_cursor` resumes after.

    Raises :class:`InvalidCheckpointError` for a string this store did not issue.
    """
    if cursor.startswith(_CURSOR_TAG):
        try:
            member = base64.urlsafe_b64decode(cursor[len(_CURSOR_TAG) :].encode("ascii"))
        except (binascii.Error, UnicodeEncodeError):
            pass
        else:
            namespace, separator, key = member.partition(b"\x00")
            if namespace and separator and key and _is_utf8(member):
                return member
    raise InvalidCheckpointError("cursor must be a string from a previous page of this store")


class CheckpointKeys:
    """Key names of the checkpoint store under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: The prefix of every record key; the list script derives record keys from it.
        self.record_base = f"{prefix}:cp:".encode()
        #: The sorted set of every record key, scored by expiry time.
        self.all_records = f"{prefix}:cpall".encode()
        #: The prefix of every status index key; the scripts derive those keys from it.
        self.status_base = f"{prefix}:cpst:".encode()

    def record(self, namespace: str, key: str) -> bytes:
        """The hash holding one record."""
        ns = namespace.encode()
        return self.record_base + str(len(ns)).encode() + b":" + ns + b":" + key.encode()

    def owner_index(self, owner: str) -> bytes:
        """The sorted set indexing the records of one owner (``owner`` from :func:`owner_text`)."""
        return f"{self.prefix}:cpidx:{owner}".encode()

    def status_index(self, owner: str, status: str) -> bytes:
        """The sorted set indexing one owner's records of one status (as the scripts name it)."""
        encoded = status.encode()
        return (
            self.status_base + str(len(encoded)).encode() + b":" + encoded + b":" + owner.encode()
        )

    @staticmethod
    def owner_text(ownership: dict[str, str] | None) -> str:
        """The canonical JSON of a normalised ownership map; empty for unowned."""
        return "" if ownership is None else dumps(ownership).decode()

    @staticmethod
    def namespace_range(namespace: str) -> tuple[bytes, bytes]:
        """``ZRANGEBYLEX`` bounds covering exactly the members of ``namespace``."""
        escaped = _escape(namespace.encode())
        return b"[" + escaped + b"\x00", b"(" + escaped + b"\x01"


class SessionKeys:
    """Key names of the session store under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: The prefix of every entry key; the branch and list scripts append entry ids to it.
        self.entry_base = f"{prefix}:se:".encode()

    def entry(self, entry_id: str) -> bytes:
        """The hash holding one entry."""
        return self.entry_base + entry_id.encode()

    def order(self, session_id: str) -> bytes:
        """The list of a session's entry ids in append order."""
        return f"{self.prefix}:sl:{session_id}".encode()

    def head(self, session_id: str) -> bytes:
        """The string holding the id of the session's last appended entry."""
        return f"{self.prefix}:sh:{session_id}".encode()
