"""What an MCP server is to a host: a command to run over stdio, or a Streamable HTTP URL.

Each description checks its arguments when it is built and knows how to open its transport
with the official SDK (``stdio_client``, ``streamable_http_client``); it holds no connection.
A stdio server is started through a small supervisor (``_launcher.py``) so that it dies with
the process that started it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ._errors import MCPConfigError
from ._oauth import ClientCredentials

__all__ = ("MCPServerHTTP", "MCPServerStdio", "Streams")

#: The read and write streams a transport yields to a ``ClientSession``.
Streams = tuple[Any, Any]

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_LAUNCHER = str(Path(__file__).with_name("_launcher.py"))
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")
#: Connect, write and pool timeouts of the HTTP client (the SDK's defaults).
_HTTP_TIMEOUT = 30.0
#: The least read timeout of the HTTP client (the SDK's default); a call waits longer when
#: its ``call_timeout`` is longer.
_HTTP_READ_TIMEOUT = 300.0


def _checked_name(name: Any, default: str) -> str:
    if name is None:
        return default
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise MCPConfigError(
            f"an MCP server name must be letters, digits, '_' or '-', got {name!r}"
        )
    return name


def _derived_name(text: str) -> str:
    """``text`` with every run of characters a tool name cannot hold replaced by ``_``."""
    return _NOT_NAME.sub("_", text).strip("_") or "mcp"


def _string_map(value: Any, what: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise MCPConfigError(f"{what} must be a mapping of strings to strings")
    return dict(value)


class MCPServerStdio:
    """A server Prism starts as a subprocess and speaks to over its stdin and stdout.

    ``env`` is added to the few variables the SDK passes on by default (``PATH``, ``HOME``,
    ``USER``, ``SHELL``, ``TERM``, ``LOGNAME``); nothing else of the host's environment reaches
    the server. ``name`` (letters, digits, ``_``, ``-``) defaults to the basename of
    ``command`` without its extension, other characters replaced by ``_``
    (``/usr/bin/mcp-server-everything`` → ``mcp-server-everything``, ``python3.12`` →
    ``python3``); it is the prefix of the tools' names under ``mcp_tools(prefix=True)``.

    The server process dies with the process that started it: a worker that is SIGKILLed
    leaves no server behind to finish a call (see ``_launcher.py``).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise MCPConfigError("an MCP stdio server needs a non-empty command string")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise MCPConfigError("args must be a sequence of strings (not one string)")
        if cwd is not None and not isinstance(cwd, str | os.PathLike):
            raise MCPConfigError("cwd must be a path")
        self.command = command
        self.args = tuple(args)
        self.env = _string_map(env, "env")
        self.cwd = cwd
        self.name = _checked_name(name, _derived_name(Path(command).stem))

    def __repr__(self) -> str:
        # The environment may hold credentials: only its keys are shown.
        env = sorted(self.env) if self.env is not None else None
        return (
            f"MCPServerStdio({self.command!r}, {list(self.args)!r}, env keys={env!r}, "
            f"cwd={self.cwd!r}, name={self.name!r})"
        )

    @property
    def describe(self) -> str:
        """How log lines and errors name this server."""
        return f"MCP server {self.name!r} ({Path(self.command).name} over stdio)"

    @asynccontextmanager
    async def open(self, call_timeout: float, max_message_bytes: int) -> AsyncIterator[Streams]:
        """The SDK's stdio transport to a freshly started server process, started through
        the supervisor that kills it when this process dies."""
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-I", "-S", _LAUNCHER, str(os.getpid()), self.command, *self.args],
            env=self.env,
            cwd=Path(self.cwd) if self.cwd is not None else None,
        )
        async with stdio_client(parameters, errlog=_errlog()) as streams:
            yield streams


def _errlog() -> TextIO:
    """Where the server's stderr goes: ours as it is now (not as it was at import time), or
    the process's own stderr when ours is no file (a notebook's, a test's capture)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError):
            continue
    raise MCPConfigError("the server's stderr needs a file descriptor, and this process has none")


class MCPServerHTTP:
    """A server Prism reaches over Streamable HTTP at ``url``, sending ``headers`` (for
    example ``Authorization``) with every request.

    ``auth`` authorizes the requests with OAuth through the SDK's own client support: an
    ``httpx2.Auth`` such as ``mcp.client.auth.OAuthClientProvider`` (authorization code with
    PKCE, the host's redirect and callback handlers, metadata discovery, dynamic or
    pre-registered clients), or :func:`oauth_client_credentials` (the client credentials
    grant, bound to this server's URL).

    ``name`` defaults to the URL's host, with its port when the URL names one, characters a
    tool name cannot hold replaced by ``_`` (``http://127.0.0.1:8931/mcp`` →
    ``127_0_0_1_8931``, ``https://mcp.example.com/mcp`` → ``mcp_example_com``).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        auth: httpx2.Auth | ClientCredentials | None = None,
    ) -> None:
        if not isinstance(url, str):
            raise MCPConfigError("an MCP HTTP server needs a URL string")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MCPConfigError(f"an MCP HTTP server URL must be http(s)://host/…, got {url!r}")
        try:
            port = parts.port
        except ValueError:
            raise MCPConfigError(f"the MCP server URL {url!r} has an invalid port") from None
        if auth is not None and not isinstance(auth, httpx2.Auth | ClientCredentials):
            raise MCPConfigError(
                "auth must be an mcp SDK OAuth provider (an httpx2.Auth) or "
                f"prism_mcp.oauth_client_credentials(...), got {type(auth).__name__}"
            )
        self.url = url
        self.headers = _string_map(headers, "headers")
        self.auth = auth
        host = parts.hostname if port is None else f"{parts.hostname}_{port}"
        self.name = _checked_name(name, _derived_name(host))

    def __repr__(self) -> str:
        # Header values are usually credentials: only their names are shown.
        headers = sorted(self.headers) if self.headers is not None else None
        auth = type(self.auth).__name__ if self.auth is not None else None
        return (
            f"MCPServerHTTP({self.url!r}, header names={headers!r}, name={self.name!r}, "
            f"auth={auth})"
        )

    @property
    def describe(self) -> str:
        """How log lines and errors name this server."""
        parts = urlsplit(self.url)
        return f"MCP server {self.name!r} ({parts.scheme}://{parts.netloc}{parts.path})"

    @asynccontextmanager
    async def open(self, call_timeout: float, max_message_bytes: int) -> AsyncIterator[Streams]:
        """The SDK's Streamable HTTP transport, on an HTTP client carrying ``headers`` and
        ``auth``; an event-stream message over ``max_message_bytes`` is refused by the SDK
        before it is buffered whole."""
        timeout = httpx2.Timeout(_HTTP_TIMEOUT, read=max(_HTTP_READ_TIMEOUT, call_timeout))
        auth = (
            self.auth.provider(self.url) if isinstance(self.auth, ClientCredentials) else self.auth
        )
        async with (
            httpx2.AsyncClient(headers=self.headers, timeout=timeout, auth=auth) as client,
            streamable_http_client(
                self.url, http_client=client, max_sse_event_size=max_message_bytes
            ) as streams,
        ):
            yield streams
