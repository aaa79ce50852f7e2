"""A checkpoint store on one JSON file, locked per instance only: a test double.

It reads the file, checks versions and fencing tokens, yields, then writes the file. One
instance serialises its own saves with a lock, so every single-instance race passes; two
instances on the same file (two worker processes) interleave between read and write.
Passing ``lock=`` shares one lock between instances: the corrected store.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from prism_core.errors import CheckpointConflictError
from prism_core.stores import CheckpointPage, CheckpointRecord, CheckpointStoreBase, SaveRequest


class JsonFileCheckpointStore(CheckpointStoreBase):
    """Checkpoints in one JSON file: ``{"<namespace>\\u0000<key>": record fields}``."""

    def __init__(self, path: Path, *, lock: anyio.Lock | None = None) -> None:
        super().__init__()
        self.path = path
        self._lock = lock if lock is not None else anyio.Lock()

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    @staticmethod
    def _record(namespace: str, key: str, row: dict[str, Any]) -> CheckpointRecord:
        return CheckpointRecord(namespace=namespace, key=key, **row)

    async def load(
        self, namespace: str, key: str, *, ownership: dict[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        row = self._read().get(f"{namespace}\0{key}")
        if row is None or (row["ownership"] or None) != (ownership or None):
            return None
        return self._record(namespace, key, row)

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Check, yield, write: atomic only against saves through this same instance."""
        namespace, key, version = request.namespace, request.key, request.version
        expected_version, fencing_token = request.expected_version, request.fencing_token
        ownership = request.ownership
        async with self._lock:
            rows = self._read()
            current = rows.get(f"{namespace}\0{key}")
            stored_version = current["version"] if current else 0
            stored_token = current["fencing_token"] if current else None
            if (
                (expected_version is not None and expected_version != stored_version)
                or version <= stored_version
                or (stored_token is not None and (fencing_token or -1) < stored_token)
                or (current and (current["ownership"] or None) != (ownership or None))
            ):
                raise CheckpointConflictError(f"checkpoint {namespace}/{key} changed")
            # The window a second instance slips through: another process runs here.
            await anyio.lowlevel.checkpoint()
            now = time.time()
            row = {
                "version": version,
                "value": json.loads(request.value_json),
                "metadata": request.metadata,
                "ownership": ownership,
                "fencing_token": fencing_token,
                "category": request.category,
                "created_at": current["created_at"] if current else now,
                "updated_at": now,
            }
            rows = self._read()
            rows[f"{namespace}\0{key}"] = row
            self.path.write_text(json.dumps(rows), encoding="utf-8")
            return self._record(namespace, key, json.loads(json.dumps(row)))

    async def delete(
        self, namespace: str, key: str, *, ownership: dict[str, str] | None = None
    ) -> bool:
        """Remove the record if the caller owns it."""
        async with self._lock:
            if await self.load(namespace, key, ownership=ownership) is None:
                return False
            rows = self._read()
            del rows[f"{namespace}\0{key}"]
            self.path.write_text(json.dumps(rows), encoding="utf-8")
            return True

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: dict[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Every record of ``namespace`` owned by the caller, in one page."""
        records = [
            self._record(*name.split("\0", 1), row)
            for name, row in sorted(self._read().items())
            if (namespace is None or name.split("\0", 1)[0] == namespace)
            and (row["ownership"] or None) == (ownership or None)
        ]
        return CheckpointPage(tuple(records[:limit]))

    async def aclose(self) -> None:
        """Nothing to release."""
