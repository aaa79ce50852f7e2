"""What the crash-test worker processes share: a line protocol on stdout and the host's
effect log (one appended, fsynced JSON line per applied effect), which the tests count.

The workers run as scripts (``python tests/…/…_worker.py``); each puts the repository root on
``sys.path`` before importing this module."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ("EffectLog", "say")


def say(line: dict[str, Any]) -> None:
    """Print one JSON line for the test and flush it at once (the process may be killed)."""
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class EffectLog:
    """The host's effect log at ``path``: one fsynced line per applied effect."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def applied(self, by: str = "key") -> dict[str, Any]:
        """Each applied effect's value by its ``by`` field (``"key"``: the idempotency key,
        ``"call"``: the tool call id), the first line of each winning; a torn last line
        (a kill mid-write) is not an effect."""
        if not self.path.exists():
            return {}
        found: dict[str, Any] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.endswith("}"):
                record = json.loads(line)
                found.setdefault(record[by], record["value"])
        return found

    def applications(self, by: str = "key") -> list[Any]:
        """The ``by`` field of every applied effect, in order, repeats included (a torn last
        line is not an effect): how many times each effect really happened."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line)[by] for line in lines if line.endswith("}")]

    def apply(self, key: str, call: str, value: Any) -> None:
        """Append the effect of ``call`` under idempotency ``key`` and fsync it."""
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "call": call, "value": value}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
