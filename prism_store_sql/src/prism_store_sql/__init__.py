"""Prism checkpoint and session stores on SQLAlchemy 2 async: SQLite and PostgreSQL.

``sqlite:///run.db`` is the embedded default (aiosqlite, WAL mode); ``postgresql://…``
(asyncpg) is for stores shared by many workers. The stores run on asyncio.
"""

from ._checkpoints import SqlCheckpointStore, create_sql_checkpoint_store
from ._engine import STORE_SCHEMES
from ._errors import (
    SqlStoreConfigError,
    SqlStoreDriverError,
    SqlStoreMigrationError,
    SqlStoreSchemaError,
)
from ._migrations import SCHEMA_VERSION, migrate, read_schema_version
from ._plugin import SqlStorePlugin, plugin
from ._schema import DEFAULT_TABLE_PREFIX
from ._sessions import SqlSessionStore, create_sql_session_store

__all__ = (
    "DEFAULT_TABLE_PREFIX",
    "SCHEMA_VERSION",
    "STORE_SCHEMES",
    "SqlCheckpointStore",
    "SqlSessionStore",
    "SqlStoreConfigError",
    "SqlStoreDriverError",
    "SqlStoreMigrationError",
    "SqlStorePlugin",
    "SqlStoreSchemaError",
    "create_sql_checkpoint_store",
    "create_sql_session_store",
    "migrate",
    "plugin",
    "read_schema_version",
)
