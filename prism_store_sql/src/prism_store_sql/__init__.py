"""Prism checkpoint and session stores on SQLite and PostgreSQL.

``sqlite:///run.db`` is the embedded default: one stdlib ``sqlite3`` connection in WAL mode,
driven from a worker thread, on asyncio and trio. ``postgresql://…`` (asyncpg, through
SQLAlchemy 2 async) is for stores shared by many workers, as are explicit SQLAlchemy URLs
(``sqlite+aiosqlite://``) and engines; those run on asyncio. ``open_sql_stores(url)`` opens
both stores on one connection, able to commit session entries and a checkpoint together.
"""

from ._engine import STORE_SCHEMES
from ._errors import (
    SqlStoreConfigError,
    SqlStoreDriverError,
    SqlStoreMigrationError,
    SqlStoreSchemaError,
)
from ._migrations import SCHEMA_VERSION
from ._open import (
    SqlStores,
    create_sql_checkpoint_store,
    create_sql_session_store,
    migrate,
    open_sql_stores,
    read_schema_version,
)
from ._schema import DEFAULT_TABLE_PREFIX
from ._sqlite_stores import SqliteCheckpointStore, SqliteSessionStore
from ._store_types import SqlCheckpointStore, SqlSessionStore
from ._transaction import SqlTransaction
from .plugin import SqlStorePlugin, plugin

__all__ = (
    "DEFAULT_TABLE_PREFIX",
    "SCHEMA_VERSION",
    "STORE_SCHEMES",
    "SqlCheckpointStore",
    "SqlSessionStore",
    "SqlStores",
    "SqlTransaction",
    "SqliteCheckpointStore",
    "SqliteSessionStore",
    "SqlStoreConfigError",
    "SqlStoreDriverError",
    "SqlStoreMigrationError",
    "SqlStorePlugin",
    "SqlStoreSchemaError",
    "create_sql_checkpoint_store",
    "create_sql_session_store",
    "migrate",
    "open_sql_stores",
    "plugin",
    "read_schema_version",
)
