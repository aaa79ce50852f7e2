"""The web layer's pieces on their own: the default ``authorize``, the JSON body parser's
bounds and the session claims, on memory stores and Starlette requests built in process."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from starlette.requests import Request

from prism_core import (
    AgentDecisionError,
    InvalidPrincipalError,
    Principal,
    PrismError,
    StorePair,
    create_memory_checkpoint_store,
    create_memory_session_store,
)
from prism_web import (
    MAX_JSON_DEPTH,
    BadRequest,
    Forbidden,
    Misdirected,
    NotAuthenticated,
    SessionClaims,
    authorized,
    default_authorize,
    parse_json_object,
    store_pair,
)


def _request(
    headers: dict[str, str] | None = None, client: str = "127.0.0.1", host: str = "localhost"
) -> Request:
    raw = [(b"host", host.encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": raw,
        "client": (client, 5000),
        "query_string": b"",
    }
    return Request(scope)


def _caller(authorize: Any, request: Request, channel: str = "api") -> Principal:
    async def ask() -> Principal:
        return await authorized(authorize, request, channel=channel)

    return anyio.run(ask)


def test_the_default_with_a_token_takes_the_bearer_or_the_cookie() -> None:
    authorize = default_authorize("s3cret", setting="T", cookie="prism_token")
    assert _caller(authorize, _request({"Authorization": "Bearer s3cret"})) == Principal(
        None, "api", "api"
    )
    signed_in = _caller(authorize, _request({"Cookie": "prism_token=s3cret"}), "console")
    assert (signed_in.actor, signed_in.channel) == ("console", "console")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
        with pytest.raises(NotAuthenticated):
            _caller(authorize, _request(headers, client="203.0.113.9", host="prism.example"))
    bearer_only = default_authorize("s3cret", setting="T")
    with pytest.raises(NotAuthenticated):
        _caller(bearer_only, _request({"Cookie": "prism_token=s3cret"}))


def test_the_default_without_a_token_serves_this_machine_only() -> None:
    authorize = default_authorize(None, setting="T", ownership={"channel": "a2a"})
    assert _caller(authorize, _request(host="127.0.0.1:8000"), "a2a").scope == {"channel": "a2a"}
    with pytest.raises(Misdirected):
        _caller(authorize, _request(host="attacker.example"))
    with pytest.raises(Forbidden):
        _caller(authorize, _request(client="203.0.113.9"))


def test_authorize_answers_become_principals() -> None:
    """A mapping names its actor by ``actor``, else ``sub`` (kept in the ownership); a
    principal on the default channel takes the face's; a malformed answer is the host's bug."""
    mapping = _caller(lambda r: {"tenant_id": "t", "sub": "u7"}, _request(), "agui")
    assert (mapping.scope, mapping.actor, mapping.channel) == (
        {"tenant_id": "t", "sub": "u7"},
        "u7",
        "agui",
    )
    team = _caller(lambda r: Principal({"tenant_id": "t"}, actor="bob"), _request(), "a2a")
    assert (team.scope, team.actor, team.channel) == ({"tenant_id": "t"}, "bob", "a2a")

    async def later(request: Request) -> Principal:
        return Principal(actor="svc", channel="slack")

    assert _caller(later, _request(), "agui").channel == "slack"
    with pytest.raises(InvalidPrincipalError):
        _caller(lambda r: "root", _request())


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": [{"b": {"c": 1, "c": 1}}]}',
        b'{"a": 1, "a": 1}',
        b'{"a": Infinity}',
        b'{"a": "\xff"}',
        b"",
        b"null",
        b'"text"',
        b"{}}",
    ],
)
def test_anything_but_one_unambiguous_object_is_refused(body: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_json_object(body)


def test_the_nesting_bound_is_exact() -> None:
    """An object holding arrays to depth ``MAX_JSON_DEPTH`` is taken, one more level is not;
    a very deep body (past the parser's recursion) is refused as a bad request too."""
    inner = MAX_JSON_DEPTH - 1
    taken = b'{"a": ' + b"[" * inner + b"]" * inner + b"}"
    assert parse_json_object(taken)["a"] is not None
    deeper = b'{"a": ' + b"[" * (inner + 1) + b"]" * (inner + 1) + b"}"
    with pytest.raises(BadRequest, match="nests deeper"):
        parse_json_object(deeper)
    with pytest.raises(BadRequest):
        parse_json_object(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert parse_json_object(json.dumps({"a": {"b": [1, {"c": None}]}}).encode()) == {
        "a": {"b": [1, {"c": None}]}
    }


def _refuse(session_id: str, why: str) -> PrismError:
    return AgentDecisionError(f"{why}: {session_id}")


def test_session_claims_keep_sessions_to_their_owner_and_agent() -> None:
    async def scenario() -> None:
        checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
        claims = SessionClaims(
            checkpoints, sessions, namespace="t.claims", agent_id="a1", refuse=_refuse
        )
        acme, globex = {"tenant_id": "acme"}, {"tenant_id": "globex"}
        fresh = await claims.read("s1", acme)
        assert (fresh.version, fresh.run_id) == (0, None)
        moved = await claims.move(fresh, "run-1", acme)
        assert (moved.version, moved.run_id, moved.agent_id) == (1, "run-1", "a1")
        again = await claims.read("s1", acme)
        assert (again.version, again.run_id) == (1, "run-1")
        # A second request that read the claim before the first moved it loses.
        with pytest.raises(AgentDecisionError, match="taken"):
            await claims.move(fresh, "run-2", acme)
        # Another owner cannot take it over: its read is of a session nobody claimed for it,
        # and its write conflicts with the claim that exists.
        theirs = await claims.read("s1", globex)
        with pytest.raises(AgentDecisionError, match="taken"):
            await claims.move(theirs, "run-3", globex)
        other_agent = SessionClaims(
            checkpoints, sessions, namespace="t.claims", agent_id="a2", refuse=_refuse
        )
        with pytest.raises(AgentDecisionError, match="unknown"):
            await other_agent.read("s1", acme)

    anyio.run(scenario)


def test_a_session_with_history_but_no_claim_is_refused() -> None:
    async def scenario() -> None:
        from prism_core import create_agent, create_mock_provider, provider_done

        sessions = create_memory_session_store()
        agent = create_agent(
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider([provider_done()]),
            store=sessions,
        )
        await agent.create_session(id="elsewhere").run("hello")
        claims = SessionClaims(
            create_memory_checkpoint_store(),
            sessions,
            namespace="t.claims",
            agent_id="a1",
            refuse=_refuse,
        )
        with pytest.raises(AgentDecisionError, match="unknown"):
            await claims.read("elsewhere", None)

    anyio.run(scenario)


def test_factories_take_a_pair_or_both_stores() -> None:
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    pair = StorePair(checkpoints, sessions)
    assert store_pair(pair) is pair
    assert tuple(store_pair(None, checkpoints=checkpoints, sessions=sessions)) == pair_tuple(pair)
    for bad in (
        {"stores": pair, "checkpoints": checkpoints},
        {"stores": None, "checkpoints": checkpoints},
        {"stores": object()},
    ):
        with pytest.raises(TypeError):
            store_pair(**bad)


def pair_tuple(pair: StorePair) -> tuple[Any, ...]:
    """Both stores of a pair, in order."""
    return tuple(pair)
