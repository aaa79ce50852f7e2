"""The agent card: built from the agent (name, description, revision, streaming, the JSON-RPC
interface at ``url`` for A2A 1.0 and 0.3, the input modes the endpoint reads, one skill), or the
host's own; served to a 1.0 client exactly as A2A 1.0 defines it (it validates against the 1.0
``AgentCard`` schema), to others with the 0.3 fields, always with ``Cache-Control: max-age``,
and never carrying the agent's instructions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.proto_utils import validate_proto_required_fields
from jsonschema import Draft202012Validator

from prism_a2a import CARD_MAX_AGE_S, MEDIA_TYPES, create_a2a_app, default_agent_card
from prism_core import create_agent, create_memory_checkpoint_store, create_memory_session_store

from ._support import DESCRIPTION, INSTRUCTIONS, Server

pytestmark = pytest.mark.anyio

CARD_PATH = "/.well-known/agent-card.json"
#: The A2A 1.0 AgentCard JSON schema (see its ``$comment`` for where it comes from).
SCHEMA = json.loads((Path(__file__).parent / "schemas" / "agent-card-1.0.json").read_text())
V1 = {"A2A-Version": "1.0"}
LEGACY_FIELDS = {"url", "preferredTransport", "protocolVersion"}


def schema_errors(card: dict[str, Any]) -> list[str]:
    """What the A2A 1.0 AgentCard schema finds wrong with ``card``."""
    return [error.message for error in Draft202012Validator(SCHEMA).iter_errors(card)]


@pytest.fixture(scope="module")
def custom_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with a card of the host's own."""
    where = tmp_path_factory.mktemp("a2a-card")
    served = Server(where / "prism.db", where / "effects", PRISM_A2A_TEST_CARD="custom")
    try:
        yield served
    finally:
        served.stop()


def test_the_vendored_schema_is_the_strict_1_0_card_schema() -> None:
    """The schema is a valid 2020-12 schema that refuses fields A2A 1.0 does not define
    (so a passing card is not a vacuous pass)."""
    Draft202012Validator.check_schema(SCHEMA)
    assert schema_errors({"name": "x", "url": "http://127.0.0.1/"})
    assert schema_errors({"name": "x", "capabilities": {"streaming": "yes"}})
    assert not schema_errors({"name": "x", "capabilities": {"streaming": True}})


def test_the_card_is_built_from_the_agent(server: Server) -> None:
    card = httpx.get(server.base + CARD_PATH, headers=V1, timeout=30).json()
    url = f"{server.base}/"
    assert card["name"] == "Billing"
    assert card["description"] == DESCRIPTION
    assert card["version"] == "billing-1"
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"] == [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    assert card["defaultInputModes"] == ["text/plain", "application/json"]
    [skill] = card["skills"]
    assert (skill["id"], skill["name"], skill["description"]) == ("billing", "Billing", DESCRIPTION)


def test_a_1_0_client_gets_a_card_valid_under_the_1_0_schema(server: Server) -> None:
    """CARD-STRUCT-001: by header or by query parameter, as A2A 1.0 lets a client say it."""
    with httpx.Client(base_url=server.base, timeout=30) as http:
        by_header = http.get(CARD_PATH, headers=V1)
        by_query = http.get(CARD_PATH, params={"A2A-Version": "1.0"})
    for answer in (by_header, by_query):
        assert answer.status_code == 200
        card = answer.json()
        assert schema_errors(card) == []
        assert not LEGACY_FIELDS & card.keys()
        for field in ("name", "description", "version", "capabilities", "skills"):
            assert card[field], field
        assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"


def test_a_client_that_names_no_version_gets_the_0_3_fields(server: Server) -> None:
    """A2A reads an absent ``A2A-Version`` as 0.3: such a client gets the card with the 0.3
    fields it needs to find the endpoint (which the 1.0 schema does not allow)."""
    card = httpx.get(server.base + CARD_PATH, timeout=30).json()
    url = f"{server.base}/"
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        url,
        "JSONRPC",
        "0.3",
    )
    assert len(card["supportedInterfaces"]) == 2
    assert schema_errors(card) != []


def test_every_card_answer_can_be_cached(server: Server) -> None:
    """``Cache-Control`` with a ``max-age``, ``Vary: A2A-Version`` (the two cards differ), and
    an ``ETag`` that a revalidation matches with ``304``."""
    with httpx.Client(base_url=server.base, timeout=30) as http:
        answers = {"1.0": http.get(CARD_PATH, headers=V1), "none": http.get(CARD_PATH)}
        for answer in answers.values():
            assert answer.headers["cache-control"] == f"public, max-age={CARD_MAX_AGE_S}"
            assert answer.headers["vary"] == "A2A-Version"
        assert answers["1.0"].headers["etag"] != answers["none"].headers["etag"]
        etag = answers["1.0"].headers["etag"]
        again = http.get(CARD_PATH, headers={**V1, "if-none-match": etag})
        changed = http.get(CARD_PATH, headers={**V1, "if-none-match": 'W/"other"'})
    assert again.status_code == 304
    assert again.headers["cache-control"] == f"public, max-age={CARD_MAX_AGE_S}"
    assert again.content == b""
    assert changed.status_code == 200


def test_the_card_never_carries_the_instructions(server: Server) -> None:
    with httpx.Client(base_url=server.base, timeout=30) as http:
        served = [http.get(CARD_PATH, headers=V1).text, http.get(CARD_PATH).text]
    for text in served:
        assert INSTRUCTIONS not in text
        assert "approvals queue" not in text


def test_an_agent_without_a_description_is_named_not_instructed() -> None:
    agent = create_agent(
        id="ops",
        name="Ops",
        model={"provider": "mock", "model": "demo"},
        instructions="Secret runbook: page the on-call first.",
    )
    card = default_agent_card(agent, url="http://127.0.0.1:1/", version="r1")
    assert card.description == "Ops"
    assert [skill.description for skill in card.skills] == ["Ops"]
    assert "runbook" not in str(card)


async def test_the_official_1_0_client_reads_the_card(server: Server) -> None:
    """The a2a-sdk client sends ``A2A-Version: 1.0`` and reads the 1.0 card; the resolver
    alone (no version) reads the other; both give the same card."""
    async with httpx.AsyncClient(timeout=30) as http:
        ClientFactory(ClientConfig(httpx_client=http))  # sets A2A-Version on the client
        assert http.headers["A2A-Version"] == "1.0"
        as_1_0 = await A2ACardResolver(http, server.base).get_agent_card()
    async with httpx.AsyncClient(timeout=30) as http:
        unversioned = await A2ACardResolver(http, server.base).get_agent_card()
    validate_proto_required_fields(as_1_0)
    assert as_1_0 == unversioned
    assert as_1_0.name == "Billing"
    assert list(as_1_0.default_input_modes) == list(MEDIA_TYPES)


def test_a_card_of_the_hosts_own_replaces_it(custom_server: Server) -> None:
    card = httpx.get(custom_server.base + CARD_PATH, headers=V1, timeout=30).json()
    assert card["name"] == "Billing desk"
    assert card["version"] == "7"
    assert [i["protocolVersion"] for i in card["supportedInterfaces"]] == ["1.0"]
    assert [s["id"] for s in card["skills"]] == ["refunds"]
    assert schema_errors(card) == []


@pytest.mark.parametrize(
    ("default_modes", "skill_modes"),
    [(["text/plain", "image/png"], []), (["text/plain"], ["application/pdf"])],
)
def test_a_card_declaring_input_the_endpoint_does_not_read_is_refused(
    default_modes: list[str], skill_modes: list[str]
) -> None:
    card = AgentCard(
        name="Billing desk",
        description="Refunds.",
        version="7",
        supported_interfaces=[
            AgentInterface(url="http://127.0.0.1:1/", protocol_binding="JSONRPC")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=default_modes,
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="r", name="R", description="R", input_modes=skill_modes)],
    )
    agent = create_agent(id="billing", model={"provider": "mock", "model": "demo"})
    with pytest.raises(ValueError, match="does not read"):
        create_a2a_app(
            agent,
            definition_revision="r1",
            checkpoints=create_memory_checkpoint_store(),
            sessions=create_memory_session_store(),
            url="http://127.0.0.1:1/",
            agent_card=card,
        )
