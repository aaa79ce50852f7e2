"""A run's plan, resolved from an agent's configuration and a run's options without a session
or a run: the defaults, the options that win over the agent, and the combinations refused."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from prism_core import (
    AgentLoopStateError,
    AgentRunStateError,
    CompactionConfig,
    GenerateValidateReviseLoop,
    Guardrail,
    GuardrailConfig,
    InvalidOptionsError,
    RunStateOptions,
    TurnPolicy,
    create_agent,
    create_memory_checkpoint_store,
    create_secret_redactor,
)
from prism_core.durable import MAX_PERSISTED_TOOL_NAMES
from prism_core.guardrails import CompiledGuardrailPacks
from prism_core.runs._options import RunOptions, coerce_run_options
from prism_core.runs._plan import SECURE_DEFAULTS, RunPlan, resolve_run_plan

MODEL = {"provider": "mock", "model": "m"}


def _allow(context: Any) -> dict[str, str]:
    return {"action": "allow"}


def _guard(name: str, stage: Any = "tool_input") -> Guardrail:
    return Guardrail(name, stage, _allow)


def _plan(agent_options: dict[str, Any] | None = None, **options: Any) -> RunPlan:
    config = create_agent(model=MODEL, **(agent_options or {})).config
    return resolve_run_plan(config, coerce_run_options(options))


class _NoSnapshotLoop:
    """A loop strategy without snapshot()/restore()."""

    name = "plain"
    revision = "1"

    async def run(self, context: Any) -> Any:
        yield None  # pragma: no cover - never run


# -- defaults ---------------------------------------------------------------------------------


def test_a_plan_without_options_is_the_agents_configuration() -> None:
    """With no run options the plan carries the agent's model, limits, layout, disclosure and
    metadata, the single-shot loop, no system prompt, no durable options and no optional
    features."""
    config = create_agent(model=MODEL, limits={"max_turns": 5}, metadata={"team": "a"}).config
    plan = resolve_run_plan(config, RunOptions())
    assert plan.model == config.model
    assert plan.limits == config.limits
    assert plan.limits.max_turns == 5
    assert plan.loop.name == "single-shot"
    assert plan.metadata == {"team": "a"}
    assert plan.input_layout == "cache_aware"
    assert plan.skills_disclosure == "progressive"
    assert (plan.system, plan.system_parts) == (None, (None, None))
    assert plan.guardrails == GuardrailConfig()
    assert plan.run_guardrails == GuardrailConfig()
    assert (plan.retry, plan.compaction, plan.turn_policy, plan.attention) == (None,) * 4
    assert (plan.tool_result_fold, plan.output_type, plan.run_state) == (None,) * 3
    assert (plan.tool_names, plan.redactor, plan.provider_source) == (None,) * 3
    assert (plan.stop_hooks, plan.active_skills, plan.policies) == ((), (), ())


def test_a_plan_is_frozen() -> None:
    """Nothing assigns to a plan once it is resolved; a resume evolves it instead."""
    plan = _plan()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        plan.limits = plan.limits  # type: ignore[misc]


def test_each_plan_gets_a_fresh_copy_of_a_loop_with_per_run_state() -> None:
    """A loop that makes per-run copies (``new_run``) is copied for each plan, so two runs never
    share its loop-local state."""
    loop = GenerateValidateReviseLoop(lambda text: None)
    config = create_agent(model=MODEL, loop=loop).config
    first = resolve_run_plan(config, RunOptions())
    second = resolve_run_plan(config, RunOptions())
    assert first.loop is not loop
    assert first.loop is not second.loop
    assert first.loop.name == "generate-validate-revise"


def test_the_agents_part_of_the_system_prompt_comes_before_the_runs() -> None:
    """Instructions and agent layers make the agent's part, the run's layers its own; the
    whole prompt joins them with a blank line."""
    plan = _plan(
        {"instructions": "Be brief.", "system_prompt": ["Agent layer."]},
        system_prompt=["Run layer."],
    )
    assert plan.system_parts == ("Be brief.\n\nAgent layer.", "Run layer.")
    assert plan.system == "Be brief.\n\nAgent layer.\n\nRun layer."


# -- the run's options win -------------------------------------------------------------------


def test_run_options_override_the_agents() -> None:
    """Model, input layout, thinking level, disclosure, turn policy and stop hooks of the run
    replace the agent's."""

    def agent_hook(context: Any) -> None:
        return None

    def hook(context: Any) -> None:
        return None

    plan = _plan(
        {"thinking_level": "low", "turn_policy": {"max_turns": 4}, "stop_hooks": [agent_hook]},
        model={"provider": "mock", "model": "other"},
        input_layout="legacy",
        thinking_level="high",
        skills_disclosure="eager",
        turn_policy={"max_turns": 2},
        stop_hooks=[hook],
    )
    assert (plan.model.provider, plan.model.model) == ("mock", "other")
    assert (plan.input_layout, plan.thinking_level) == ("legacy", "high")
    assert plan.skills_disclosure == "eager"
    assert plan.turn_policy == TurnPolicy(max_turns=2)
    assert plan.stop_hooks == (hook,)


def test_limits_narrow_and_metadata_merges_agent_then_session_then_run() -> None:
    """The run's limits narrow the agent's; metadata is the agent's, then the session's, then
    the run's (a later key wins); provider options merge the same way."""
    config = create_agent(
        model=MODEL,
        limits={"max_turns": 5},
        metadata={"a": 1, "b": 1},
        provider_options={"temperature": 0.1, "top_p": 0.9},
    ).config
    options = coerce_run_options(
        {"limits": {"max_turns": 3}, "metadata": {"c": 3}, "provider_options": {"top_p": 0.5}}
    )
    plan = resolve_run_plan(config, options, session_metadata={"b": 2, "c": 2})
    assert plan.limits.max_turns == 3
    assert plan.metadata == {"a": 1, "b": 2, "c": 3}
    assert plan.provider_options == {"temperature": 0.1, "top_p": 0.5}


def test_a_run_turns_off_the_agents_compaction_and_fold() -> None:
    """``compaction=False`` and ``tool_result_fold=False`` on a run turn the agent's off."""
    agent = {
        "compaction": {"threshold_entries": 10},
        "tool_result_fold": {"summarize": lambda text: "short"},
    }
    assert _plan(agent).compaction == CompactionConfig(threshold_entries=10)
    assert _plan(agent).tool_result_fold is not None
    plan = _plan(agent, compaction=False, tool_result_fold=False)
    assert (plan.compaction, plan.tool_result_fold) == (None, None)


def test_guards_run_agent_then_packs_then_run() -> None:
    """Tool-input guards: the agent's, the session packs', the run's; tool-output: the packs'
    observers first, then the agent's, then the run's. The run's own guards are kept apart."""
    agent_in, agent_out = _guard("agent-in"), _guard("agent-out", "tool_output")
    pack_in, pack_out = _guard("pack-in"), _guard("pack-out", "tool_output")
    run_in = _guard("run-in")
    config = create_agent(model=MODEL, guardrails=[agent_in, agent_out]).config
    packs = CompiledGuardrailPacks(tool_input=(pack_in,), tool_output=(pack_out,), refs=())
    plan = resolve_run_plan(config, coerce_run_options({"guardrails": [run_in]}), packs=packs)
    assert plan.guardrails.tool_input == (agent_in, pack_in, run_in)
    assert plan.guardrails.tool_output == (pack_out, agent_out)
    assert plan.run_guardrails.tool_input == (run_in,)


def test_a_run_relaxes_the_agents_attention_compiler() -> None:
    """A run may raise the agent's trigger ratio; ``False`` turns the compiler off."""
    agent = {"attention_compiler": {"max_input_tokens": 1000, "trigger_ratio": 0.5}}
    relaxed = _plan(agent, attention_compiler={"trigger_ratio": 0.8}).attention
    assert relaxed is not None
    assert (relaxed.max_input_tokens, relaxed.trigger_ratio) == (1000, 0.8)
    assert _plan(agent, attention_compiler=False).attention is None


def test_the_durable_options_are_the_agents_or_the_runs() -> None:
    """The agent's ``run_state`` (a mapping or ``RunStateOptions``) or the run's becomes the
    plan's checked options; a resumed plan resolves none (the checkpoint brings its own)."""
    checkpoints = create_memory_checkpoint_store()
    agent = {"id": "a1", "run_state": {"checkpoints": checkpoints, "definition_revision": "r1"}}
    plan = _plan(agent)
    assert plan.run_state == RunStateOptions(checkpoints, "r1")
    own = RunStateOptions(checkpoints, "r2")
    from_run = _plan({"id": "a1"}, run_state=own).run_state
    assert from_run == own
    assert from_run is not None
    assert from_run.checkpoints is checkpoints
    config = create_agent(model=MODEL, **agent).config
    assert resolve_run_plan(config, RunOptions(), resumed=True).run_state is None


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "options"),
    [
        ({}, {"loop": "no-such-loop"}),
        ({}, {"system_prompt": [42]}),
        ({}, {"compaction": {"keep_recent_entries": -1}}),
        ({"limits": {"max_turns": 2}}, {"turn_policy": {"max_turns": 3}}),
        ({}, {"attention_compiler": {"trigger_ratio": 0.9}}),
        ({"attention_compiler": {"max_input_tokens": 100}}, {"attention_compiler": "on"}),
        ({}, {"active_skills": ["missing"]}),
    ],
    ids=[
        "loop",
        "system-prompt",
        "compaction",
        "turn-policy",
        "attention",
        "attention-type",
        "skills",
    ],
)
def test_malformed_options_are_refused_as_invalid_options(
    agent: dict[str, Any], options: dict[str, Any]
) -> None:
    """A malformed or conflicting option is an ``InvalidOptionsError`` before any run."""
    with pytest.raises(InvalidOptionsError) as caught:
        _plan(agent, **options)
    assert caught.value.code == "ERR_PRISM_INVALID_OPTIONS"


def test_a_run_cannot_tighten_the_agents_attention_compiler() -> None:
    """A lower trigger ratio than the agent's is refused as an invalid option."""
    agent = {"attention_compiler": {"max_input_tokens": 1000, "trigger_ratio": 0.5}}
    with pytest.raises(InvalidOptionsError, match="tighten"):
        _plan(agent, attention_compiler={"trigger_ratio": 0.4})


def test_a_secure_agents_redactor_cannot_be_replaced_per_run() -> None:
    """A run of an agent composed fail-closed that passes its own redactor is refused."""
    config = attrs.evolve(create_agent(model=MODEL).config, secure=True)
    options = coerce_run_options({"redactor": create_secret_redactor(["s3cret"])})
    with pytest.raises(AgentRunStateError, match=SECURE_DEFAULTS):
        resolve_run_plan(config, options)


def test_a_run_cannot_replace_the_agents_durable_configuration() -> None:
    """A run's ``run_state`` that differs from the agent's is configuration drift."""
    checkpoints = create_memory_checkpoint_store()
    agent = {"id": "a1", "run_state": RunStateOptions(checkpoints, "r1")}
    with pytest.raises(AgentRunStateError, match="cannot replace agent durable") as caught:
        _plan(agent, run_state=RunStateOptions(checkpoints, "r2"))
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"


@pytest.mark.parametrize(
    ("agent", "options", "needle"),
    [
        ({}, {}, "agent id or name"),
        ({"id": "a1"}, {"model": {"provider": "mock", "model": "x"}}, "cannot override model"),
        (
            {"id": "a1"},
            {"tool_names": [f"t{i}" for i in range(MAX_PERSISTED_TOOL_NAMES + 1)]},
            "tool_names rides its checkpoints",
        ),
    ],
    ids=["anonymous-agent", "model-override", "tool-names"],
)
def test_a_durable_run_refuses_what_its_fingerprint_cannot_describe(
    agent: dict[str, Any], options: dict[str, Any], needle: str
) -> None:
    """A durable run needs a named agent, may not override its model per run, and grants no
    more tools by name than its checkpoints can hold."""
    run_state = RunStateOptions(create_memory_checkpoint_store(), "r1")
    with pytest.raises(AgentRunStateError, match=needle):
        _plan(agent, run_state=run_state, **options)


def test_a_durable_run_refuses_a_loop_without_snapshots() -> None:
    """The agent's loop must snapshot and restore its state to take part in a durable run."""
    agent = {"id": "a1", "loop": _NoSnapshotLoop()}
    run_state = RunStateOptions(create_memory_checkpoint_store(), "r1")
    with pytest.raises(AgentLoopStateError) as caught:
        _plan(agent, run_state=run_state)
    assert caught.value.code == "ERR_PRISM_LOOP_NOT_DURABLE"
