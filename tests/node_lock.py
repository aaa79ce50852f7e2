"""One ``npm ci`` at a time per folder: test processes running in parallel (``pytest -n``)
would otherwise install into one ``node_modules`` at once."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

__all__ = ("installing",)


@contextlib.contextmanager
def installing(folder: Path) -> Iterator[None]:
    """Hold the folder's install lock (a file beside its ``package.json``) for the block; the
    block checks again whether the tree is installed, since another process may have done it."""
    with (folder / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
