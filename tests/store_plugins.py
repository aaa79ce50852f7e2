"""The store plugins tests compose explicitly when they open stores through the demo's helpers.

``prism_cli._demo_stores`` defaults to every installed plugin, as a host's
``discover_plugins()`` does; a test (and each worker process it starts) needs only the stores,
and importing every plugin (provider SDKs included) would cost seconds per process.
"""

from __future__ import annotations

import prism_store_redis
import prism_store_sql

#: The SQL and Redis store plugins, in the order ``discover_plugins()`` gives them.
STORE_PLUGINS: tuple[object, ...] = (prism_store_redis.plugin, prism_store_sql.plugin)
