"""The client the official MCP conformance suite drives: ``prism_mcp`` against the suite's
scenario server.

    python conformance_client.py SERVER_URL

The suite sets ``MCP_CONFORMANCE_SCENARIO`` (and ``MCP_CONFORMANCE_CONTEXT``, JSON, for
scenarios that need credentials). The client opens an ``mcp_tools`` block on the server
(OAuth through ``MCPServerHTTP(auth=...)`` for the authorization scenarios, an
``elicitation_handler`` that fills in the schema's defaults) and calls every tool it lists
with arguments made from the tool's schema. It exits 0 when the block opened.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from prism_core import ToolExecutionContext
from prism_mcp import MCPServerHTTP, MCPToolError, mcp_tools, oauth_client_credentials
from prism_mcp._oauth import MemoryTokenStorage

REDIRECT_URI = "http://localhost:3000/callback"


class Browser:
    """Stands in for the user's browser: follows the authorization URL to its redirect and
    hands the code (and state, and issuer) to the SDK's callback."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as client:
            response = await client.get(url)
        query = parse_qs(urlsplit(response.headers["location"]).query)
        self.result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def _auth(url: str, context: dict[str, Any]) -> Any:
    if (
        context.get("client_secret")
        and context.get("grant") != "authorization_code"
        and ("client-credentials" in os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))
    ):
        return oauth_client_credentials(
            context["client_id"], context["client_secret"], issuer=context.get("issuer")
        )
    storage = MemoryTokenStorage()
    if context.get("client_id"):
        storage.client_info = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic"
            if context.get("client_secret")
            else "none",
        )
    browser = Browser()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="prism conformance client",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        client_metadata_url="https://conformance-test.local/client-metadata.json",
    )


def _value(schema: dict[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    return {"number": 1, "integer": 1, "boolean": True, "array": [], "object": {}}.get(
        kind if isinstance(kind, str) else "", "test"
    )


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {name: _value(sub) for name, sub in properties.items() if isinstance(sub, dict)}


def answer_with_defaults(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Accept, with each field's default (what a user who changes nothing sends)."""
    properties = schema.get("properties") or {}
    return {name: sub["default"] for name, sub in properties.items() if "default" in sub}


async def main(url: str) -> int:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    auth = _auth(url, context) if scenario.startswith("auth/") else None
    server = MCPServerHTTP(url, name="conformance", auth=auth)
    async with mcp_tools(server, elicitation_handler=answer_with_defaults) as tools:
        print(f"tools: {[tool.name for tool in tools]}; left out: {tools.rejected}")
        named = {tool.name: tool for tool in tools}
        # A scenario may name the calls to make; else every tool is called once.
        plan = [
            (named[c["name"]], c.get("arguments") or {})
            for c in context.get("toolCalls", [])
            if c["name"] in named
        ] or [(tool, _arguments(dict(tool.parameters or {}))) for tool in tools]
        for index, (tool, arguments) in enumerate(plan):
            call = ToolExecutionContext(
                session_id="conformance",
                run_id="run-1",
                tool_call_id=f"c{index}",
                tool_name=tool.name,
            )
            try:
                result = await tool.execute(arguments, call)
            except MCPToolError as exc:
                print(f"{tool.name}: {exc}")
            else:
                print(f"{tool.name}: {str(result)[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1]))
