"""Errors specific to the SQL stores: configuration, drivers and schema versions."""

from __future__ import annotations

from prism_core.errors import PrismError

__all__ = (
    "SqlStoreConfigError",
    "SqlStoreDriverError",
    "SqlStoreMigrationError",
    "SqlStoreSchemaError",
)


class SqlStoreConfigError(PrismError, ValueError):
    """A SQL store was configured wrongly: not a SQL URL, a sync driver, a bad table prefix."""

    code = "ERR_PRISM_STORE_CONFIG"


class SqlStoreDriverError(SqlStoreConfigError):
    """The database driver is not installed, or the caller is not running on asyncio.

    The message names the ``pip install`` command (or the event loop) that fixes it.
    """

    code = "ERR_PRISM_STORE_DRIVER"


class SqlStoreSchemaError(PrismError):
    """The store's tables are missing, older or newer than this release expects.

    The message names the exact ``python -m prism_store_sql migrate …`` command to run.
    """

    code = "ERR_PRISM_STORE_SCHEMA"


class SqlStoreMigrationError(SqlStoreSchemaError):
    """A migration could not even start, e.g. the SQLite file's directory does not exist.

    The message names the path and what to do about it.
    """

    code = "ERR_PRISM_MIGRATION"
