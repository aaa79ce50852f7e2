"""secrets-hygiene: secret material anywhere in any tool's arguments is refused."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core.guardrails import CompiledGuardrailPacks

from ._support import compile_packs, fired

RULE = "pack:secrets-hygiene/no-secret-material-in-arguments"


@pytest.fixture(scope="module")
def compiled() -> CompiledGuardrailPacks:
    return compile_packs(["secrets-hygiene"])


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "a1B2" * 5,
        "key sk-abcdefghijklmnop",
        "sk-" + "Z9" * 8,
        "key=sk-proj-" + "x" * 40,
        "ghp_" + "A" * 36,
        "token gho_" + "9" * 30,
        "ghs_" + "abc" * 10,
        "AKIAIOSFODNN7EXAMPLE",
        "-----BEGIN PRIVATE KEY-----\nMIIE...",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature-1",
        "xoxb-123456789012-abcdefABCDEF",
        "xoxp-1234567890",
    ],
)
def test_secret_material_is_refused(compiled: CompiledGuardrailPacks, text: str) -> None:
    assert fired(compiled, "http_request", {"body": text}) == {RULE}


@pytest.mark.parametrize(
    "text",
    [
        "sk-short",
        "sk-abcdefghijklmno",
        "task-" + "a" * 30,
        "ghp_short",
        "ghx_" + "A" * 36,
        "AKIA-not-a-key",
        "akiaiosfodnn7example",
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "eyJhbGciOiJIUzI1NiJ9 is a header",
        "xoxz-1234567890",
        "plain text about keys and tokens",
    ],
)
def test_ordinary_text_passes(compiled: CompiledGuardrailPacks, text: str) -> None:
    assert fired(compiled, "http_request", {"body": text}) == set()


@pytest.mark.parametrize(
    "arguments",
    [
        {"headers": {"authorization": "Bearer ghp_" + "z" * 36}},
        {"env": [["OPENAI_API_KEY", "sk-" + "q" * 48]]},
        {"ghp_" + "k" * 36: "value"},
    ],
)
def test_nested_strings_and_keys_are_checked(
    compiled: CompiledGuardrailPacks, arguments: dict[str, Any]
) -> None:
    assert fired(compiled, "shell", arguments) == {RULE}


def test_every_tool_is_checked(compiled: CompiledGuardrailPacks) -> None:
    for tool in ("write", "shell", "anything"):
        assert fired(compiled, tool, {"content": "AKIAIOSFODNN7EXAMPLE"}) == {RULE}
