"""OAuth for Streamable HTTP servers through the SDK's own client support.

``oauth_client_credentials(client_id, client_secret, scopes=())`` describes a machine client
(the client credentials grant); ``MCPServerHTTP`` binds it to its URL, so the SDK's
``ClientCredentialsOAuthProvider`` discovers the protected resource's metadata and its
authorization server, then asks for a token, all on its own. Tokens live in memory for as
long as the ``mcp_tools`` block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ._errors import MCPConfigError

__all__ = ("ClientCredentials", "MemoryTokenStorage", "oauth_client_credentials")


class MemoryTokenStorage:
    """The SDK's ``TokenStorage`` in memory: tokens and client registration for one block."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens."""
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store ``tokens``."""
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration."""
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store ``client_info``."""
        self.client_info = client_info


@attrs.frozen(repr=False)
class ClientCredentials:
    """A machine client's credentials, for :class:`MCPServerHTTP` ``auth=``."""

    client_id: str
    client_secret: str
    scopes: tuple[str, ...] = ()
    issuer: str | None = None
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"
    )

    def __repr__(self) -> str:
        # The secret is a credential: never shown.
        return f"ClientCredentials(client_id={self.client_id!r}, scopes={list(self.scopes)!r})"

    def provider(self, server_url: str) -> OAuthClientProvider:
        """The SDK provider for the server at ``server_url``."""
        return ClientCredentialsOAuthProvider(
            server_url=server_url,
            storage=MemoryTokenStorage(),
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method=self.token_endpoint_auth_method,
            scope=" ".join(self.scopes) or None,
            issuer=self.issuer,
        )


def oauth_client_credentials(
    client_id: str,
    client_secret: str,
    scopes: Sequence[str] = (),
    *,
    issuer: str | None = None,
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"
    ),
) -> ClientCredentials:
    """OAuth client credentials for ``MCPServerHTTP(url, auth=...)``: the SDK discovers the
    server's authorization server and asks it for a token with ``client_id`` and
    ``client_secret`` (HTTP Basic, or in the form with ``client_secret_post``), requesting
    ``scopes``. ``issuer`` names the authorization server the credentials belong to: the
    flow then refuses any other one the server points at (recommended; the SDK warns
    without it)."""
    for value, what in ((client_id, "client_id"), (client_secret, "client_secret")):
        if not isinstance(value, str) or not value:
            raise MCPConfigError(f"{what} must be a non-empty string")
    if isinstance(scopes, str) or not all(isinstance(s, str) and s for s in scopes):
        raise MCPConfigError("scopes must be a sequence of non-empty strings (not one string)")
    if issuer is not None and not isinstance(issuer, str):
        raise MCPConfigError("issuer must be a URL string")
    if token_endpoint_auth_method not in ("client_secret_basic", "client_secret_post"):
        raise MCPConfigError(
            "token_endpoint_auth_method must be 'client_secret_basic' or 'client_secret_post'"
        )
    return ClientCredentials(
        client_id, client_secret, tuple(scopes), issuer, token_endpoint_auth_method
    )
