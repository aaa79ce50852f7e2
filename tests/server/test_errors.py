"""Refusals become HTTP statuses by their error classes and codes, never by their messages."""

from __future__ import annotations

import json

from prism_core import AgentRunNotFoundError, AgentRunStateError
from prism_server._errors import error_response, status_for


def test_a_run_not_found_is_404_whatever_the_message() -> None:
    absent = AgentRunNotFoundError("no durable run by that id here")
    assert absent.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert status_for(absent) == 404
    answer = error_response(absent)
    assert answer.status_code == 404
    assert json.loads(answer.body) == {
        "code": "ERR_PRISM_SERVER_NOT_FOUND",
        "message": "no such run",
    }


def test_a_state_refusal_with_another_code_is_409_even_if_it_reads_not_found() -> None:
    stale = AgentRunStateError("Agent run checkpoint not found")
    assert stale.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert status_for(stale) == 409
    in_doubt = AgentRunStateError("a call is in doubt", code="ERR_PRISM_TOOL_IN_DOUBT")
    assert status_for(in_doubt) == 409
