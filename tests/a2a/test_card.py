"""The agent card: built from the agent (name, revision, streaming, the JSON-RPC interface at
``url`` for A2A 1.0 and 0.3, one skill), or the host's own."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.utils.proto_utils import validate_proto_required_fields

from ._support import Server

pytestmark = pytest.mark.anyio

CARD_PATH = "/.well-known/agent-card.json"


@pytest.fixture(scope="module")
def custom_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with a card of the host's own."""
    where = tmp_path_factory.mktemp("a2a-card")
    served = Server(where / "prism.db", where / "effects", PRISM_A2A_TEST_CARD="custom")
    try:
        yield served
    finally:
        served.stop()


def test_the_card_is_built_from_the_agent(server: Server) -> None:
    card = httpx.get(server.base + CARD_PATH, timeout=30).json()
    url = f"{server.base}/"
    assert card["name"] == "Billing"
    assert card["version"] == "billing-1"
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"] == [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    # The A2A 0.3 fields, for 0.3 clients.
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        url,
        "JSONRPC",
        "0.3",
    )
    assert card["defaultInputModes"] == ["text/plain", "application/json"]
    [skill] = card["skills"]
    assert (skill["id"], skill["name"]) == ("billing", "Billing")
    assert skill["description"]


async def test_the_card_has_every_field_a2a_requires(server: Server) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, server.base).get_agent_card()
    validate_proto_required_fields(card)
    assert card.name == "Billing"
    assert card.capabilities.streaming


def test_a_card_of_the_hosts_own_replaces_it(custom_server: Server) -> None:
    card = httpx.get(custom_server.base + CARD_PATH, timeout=30).json()
    assert card["name"] == "Billing desk"
    assert card["version"] == "7"
    assert [i["protocolVersion"] for i in card["supportedInterfaces"]] == ["1.0"]
    assert [s["id"] for s in card["skills"]] == ["refunds"]
