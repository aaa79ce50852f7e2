"""The Redis client a store talks through: who owns it, and how its failures surface.

A client the store creates from a URL bounds every command by ``timeout_ms`` (connect and
socket timeouts, default :data:`DEFAULT_TIMEOUT_MS`) and retries a dropped connection at most
:data:`CONNECTION_RETRIES` times with a short jittered backoff (a killed connection or a
failover reconnects); it does not retry a timed-out command, so a stalled server fails a
call after ``timeout_ms``. A host's own client keeps the host's settings. Connection-level
failures and timeouts leave as the store's *transient* error type (for checkpoint stores
:class:`~prism_core.CheckpointStoreUnavailableError`), every other failure as its error type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import (
    BusyLoadingError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from prism_core.errors import PrismError
from prism_core.stores import echo

__all__ = (
    "CONNECTION_RETRIES",
    "DEFAULT_TIMEOUT_MS",
    "REDIS_SCHEMES",
    "TRANSIENT_ERRORS",
    "RedisConnection",
    "check_timeout_ms",
    "run_script",
    "split_store_url",
    "text",
)

#: The default bound on one command (and on connecting), in milliseconds.
DEFAULT_TIMEOUT_MS = 10000
#: How often a client created from a URL reconnects after a dropped connection.
CONNECTION_RETRIES = 2
#: Failures a retry may get past: dropped or refused connections, timeouts, a server still
#: loading its data, a failover in progress (a demoted primary answers READONLY, a cluster
#: TRYAGAIN).
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ReadOnlyError,
    TryAgainError,
    OSError,
)


def check_timeout_ms(value: Any) -> int:
    """``value`` if it is a positive integer of milliseconds, else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"timeout_ms must be a positive integer, got {echo(value)}")
    return value


#: URL schemes the Redis stores answer.
REDIS_SCHEMES = ("redis", "rediss")


def text(value: bytes | str) -> str:
    """A reply value as text, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else value


async def run_script(
    script: AsyncScript, keys: Sequence[bytes | str], args: Sequence[bytes | str]
) -> Any:
    """Run a registered script with one ``EVALSHA``, loading it again if the server lost it.

    The same as calling ``script``, minus the per-call work redis-py spends on arguments.
    """
    try:
        return await script.registered_client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return await script(keys=keys, args=args)


def split_store_url(url: str) -> tuple[str, str | None]:
    """Split a store URL into the redis-py URL and the ``?prefix=`` option (``None`` if absent).

    ``prefix`` is a store option, not a redis-py one, so it is removed before redis-py parses
    the URL. Raises ``ValueError`` when ``prefix`` is given more than once or empty.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for name, value in query if name == "prefix"]
    if len(prefixes) > 1 or (prefixes and not prefixes[0]):
        raise ValueError(f"store URL {echo(url)}: give ?prefix= once, with a non-empty value")
    # redis-py unquotes with ``unquote`` (not ``unquote_plus``), so spaces must stay %20.
    rest = urlencode([(n, v) for n, v in query if n != "prefix"], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), (prefixes[0] if prefixes else None)


class RedisConnection:
    """A ``redis.asyncio.Redis`` client plus whether the store created it (and so closes it).

    ``error`` is the typed error that Redis failures are turned into.
    """

    def __init__(
        self,
        url_or_client: str | aioredis.Redis,
        *,
        error: type[PrismError],
        transient: type[PrismError] | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        seconds = check_timeout_ms(timeout_ms) / 1000
        if isinstance(url_or_client, str):
            scheme = urlsplit(url_or_client).scheme
            if scheme not in REDIS_SCHEMES:
                raise ValueError(
                    f"expected a redis:// or rediss:// URL, got scheme {echo(scheme)} "
                    f"in {echo(url_or_client)}"
                )
            # Creating the client opens nothing: redis-py connects on the first command.
            self.client = aioredis.Redis.from_url(
                url_or_client,
                socket_timeout=seconds,
                socket_connect_timeout=seconds,
                retry=Retry(
                    ExponentialWithJitterBackoff(base=0.02, cap=0.5),
                    CONNECTION_RETRIES,
                    supported_errors=(RedisConnectionError,),
                ),
            )
            self.owned = True
        elif isinstance(url_or_client, aioredis.Redis):
            self.client = url_or_client
            self.owned = False
        else:
            raise TypeError(
                "expected a redis:// URL or a redis.asyncio.Redis client, got "
                f"{type(url_or_client).__name__} (a synchronous redis.Redis will not do)"
            )
        self.error = error
        self.transient = transient or error
        self.closed = False

    @contextmanager
    def guard(self, action: str) -> Iterator[aioredis.Redis]:
        """Yield the client for one operation; Redis failures leave as :attr:`error`."""
        if self.closed:
            raise self.error(f"cannot {action}: the Redis store is closed")
        self._require_asyncio(action)
        try:
            yield self.client
        except TRANSIENT_ERRORS as exc:
            raise self.transient(f"Redis failed to {action}: {exc}") from exc
        except RedisError as exc:
            raise self.error(f"Redis failed to {action}: {exc}") from exc

    def _require_asyncio(self, action: str) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise self.error(
                f"cannot {action}: the Redis store runs on asyncio only (redis-py's client "
                "is asyncio-based); run this host on anyio's asyncio backend, or under trio "
                "use the SQLite store (prism_store_sql, sqlite:///path.db), which works on both"
            ) from None

    async def aclose(self) -> None:
        """Close the client if the store created it; idempotent."""
        if self.closed:
            return
        if self.owned:
            self._require_asyncio("close the store")
            await self.client.aclose()
        self.closed = True
