"""Opening a store URL for an operator command: both stores as one pair, nothing created.

Every command that reads or settles runs (``runs``, ``effects``, ``audit``, ``sessions``,
``worker``) opens its ``--store`` here. It must not read or write a run.
"""

from __future__ import annotations

from prism_core import StorePair, discover_store_plugins, open_stores

__all__ = ("open_operator_stores",)


def open_operator_stores(url: str) -> StorePair:
    """The stores at ``url``, as one pair: they share a connection and commit together. An
    operator command creates nothing: a database or tables that are not there are refused."""
    return open_stores(url, plugins=discover_store_plugins(url), create=False)
