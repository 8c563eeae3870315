"""Simulated models: each reproduces its failure, reacts to the context, and is seeded."""

from __future__ import annotations

import pytest

from plangate.harness import (
    BEHAVIOURS,
    Agent,
    AssistantMessage,
    ConfigError,
    SimulatedModel,
    TurnResult,
    domain_names,
    get_domain,
    load_variant,
    model_from_spec,
)

SEEDS = range(5)
PLAN_TOOLS = {"todo_write", "todo_update", "todo_read", "finish"}


async def run(
    domain_name: str, behaviour: str, variant: str, seed: int = 0, **model_kw: object
) -> TurnResult:
    domain = get_domain(domain_name)
    model = SimulatedModel(behaviour, domain.tasks, seed=seed, **model_kw)  # type: ignore[arg-type]
    agent = Agent(
        model=model,
        variant=load_variant(variant),
        tools=domain.make_tools,
        instructions=domain.instructions,
    )
    return await agent.session(f"{behaviour}-{variant}-{seed}").run_turn(domain.demo_request)


def done(result: TurnResult, domain_name: str) -> int:
    domain = get_domain(domain_name)
    request = domain.demo_request.lower()
    tasks = [t for t in domain.tasks if any(p in request for p in t.phrases)]
    made = {f"{c.name} {c.arguments}" for c in result.tool_calls if c.status == "ok"}
    return sum(all(c.key in made for c in t.calls) for t in tasks)


def marked(result: TurnResult) -> int:
    return sum(item.status == "completed" for item in result.plan)


@pytest.fixture(params=["observability", "support"])
def domain(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_both_demo_domains_are_registered() -> None:
    assert {"observability", "support"} <= set(domain_names())


@pytest.mark.parametrize("variant", ["naive", "todo-basic", "alyx", "harness-plan"])
@pytest.mark.parametrize("seed", SEEDS)
async def test_diligent_completes_everything_everywhere(
    domain: str, variant: str, seed: int
) -> None:
    result = await run(domain, "diligent", variant, seed)
    assert result.stop_reason == "finished"
    assert done(result, domain) == 3
    if variant in ("todo-basic", "alyx", "harness-plan"):
        assert marked(result) == 3


@pytest.mark.parametrize("seed", SEEDS)
async def test_forgetful_loses_the_request_without_a_pinned_plan(domain: str, seed: int) -> None:
    naive = await run(domain, "forgetful", "naive", seed)
    alyx = await run(domain, "forgetful", "alyx", seed)
    assert naive.stop_reason == "finished" and done(naive, domain) == 1
    assert alyx.stop_reason == "finished" and done(alyx, domain) == 3 and marked(alyx) == 3


async def test_forgetful_is_a_window_not_a_script(domain: str) -> None:
    # With a window wide enough to keep the request, the same model does everything.
    wide = await run(domain, "forgetful", "naive", window=100)
    assert done(wide, domain) == 3


@pytest.mark.parametrize("seed", SEEDS)
async def test_early_finisher_is_caught_by_the_finish_gate(domain: str, seed: int) -> None:
    gated = await run(domain, "early-finisher", "alyx", seed)
    bounces = [e for e in gated.events if e.kind == "gate_bounce"]
    assert len(bounces) == 1 and marked(gated) == 3 and gated.stop_reason == "finished"
    ungated = await run(domain, "early-finisher", "todo-basic", seed)
    assert done(ungated, domain) == 3 and marked(ungated) == 2
    assert [i.status for i in ungated.plan][-1] == "pending"


@pytest.mark.parametrize("seed", SEEDS)
async def test_looper_is_stopped_by_the_loop_guard(domain: str, seed: int) -> None:
    guarded = await run(domain, "looper", "alyx", seed)
    assert guarded.stop_reason == "loop_guard"
    assert [e.kind for e in guarded.events].count("loop_warning") == 2
    naive = await run(domain, "looper", "naive", seed)
    assert naive.stop_reason == "max_iterations" and naive.iterations == 30
    work = [c for c in naive.tool_calls if c.name not in PLAN_TOOLS]
    assert len({(c.name, c.arguments) for c in work[-20:]}) == 1


async def test_looper_sticks_where_its_seed_says() -> None:
    positions = set()
    for seed in range(12):
        result = await run("observability", "looper", "naive", seed)
        first_repeat = next(
            i
            for i in range(1, len(result.tool_calls))
            if result.tool_calls[i].arguments == result.tool_calls[i - 1].arguments
        )
        positions.add(first_repeat)
    assert positions == {1, 2}


@pytest.mark.parametrize("seed", SEEDS)
async def test_announcer_ends_a_naive_turn_but_not_an_alyx_one(domain: str, seed: int) -> None:
    naive = await run(domain, "announcer", "naive", seed)
    assert naive.stop_reason == "finished" and naive.answer.startswith("Next I will use the")
    assert done(naive, domain) == 0
    alyx = await run(domain, "announcer", "alyx", seed)
    assert done(alyx, domain) == 3 and alyx.stop_reason == "finished"
    assert any(e.kind == "continuation" for e in alyx.events)


@pytest.mark.parametrize("seed", SEEDS)
async def test_silent_goes_quiet_once(domain: str, seed: int) -> None:
    naive = await run(domain, "silent", "naive", seed)
    assert naive.answer == "" and done(naive, domain) < 3
    alyx = await run(domain, "silent", "alyx", seed)
    assert done(alyx, domain) == 3
    assert [e.kind for e in alyx.events].count("continuation") == 1


async def test_churner_spends_calls_on_bookkeeping(domain: str) -> None:
    diligent = await run(domain, "churner", "naive")
    churner = await run(domain, "churner", "alyx")
    reference = await run(domain, "diligent", "alyx")
    reads = [c for c in churner.tool_calls if c.name == "todo_read"]
    work = [c for c in churner.tool_calls if c.name not in PLAN_TOOLS]
    assert len(reads) == len(work)
    assert churner.iterations > reference.iterations
    # Without plan tools there is nothing to churn on.
    assert not any(c.name == "todo_read" for c in diligent.tool_calls)


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
async def test_same_seed_same_trajectory(behaviour: str) -> None:
    first = await run("observability", behaviour, "alyx", seed=3)
    second = await run("observability", behaviour, "alyx", seed=3)
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        (c.name, c.arguments) for c in second.tool_calls
    ]
    assert first.stop_reason == second.stop_reason


async def test_seeds_change_where_the_failure_strikes() -> None:
    trajectories = set()
    for seed in range(8):
        result = await run("observability", "silent", "alyx", seed)
        silent = [
            i
            for i, m in enumerate(result.messages)
            if isinstance(m, AssistantMessage) and not m.content and not m.tool_calls
        ]
        assert len(silent) == 1
        trajectories.add(silent[0])
    assert len(trajectories) > 1


async def test_a_blocked_task_is_marked_blocked_with_its_reason() -> None:
    domain = get_domain("observability")
    blocked = next(t for t in domain.tasks if t.blocked_reason)
    other = next(t for t in domain.tasks if not t.blocked_reason and t.calls)
    request = f"{other.title}, then {blocked.phrases[0]} the search cache"
    model = SimulatedModel("diligent", domain.tasks)
    agent = Agent(model=model, variant=load_variant("alyx"), tools=domain.make_tools)
    result = await agent.session().run_turn(request)
    assert result.stop_reason == "finished"
    statuses = {item.text: (item.status, item.reason) for item in result.plan}
    assert statuses[blocked.title] == ("blocked", blocked.blocked_reason)


def test_model_specs() -> None:
    domain = get_domain("support")
    model = model_from_spec("sim:looper", domain=domain, seed=4)
    assert isinstance(model, SimulatedModel) and model.name == "sim:looper" and model.seed == 4
    with pytest.raises(
        ConfigError, match=r"unknown simulated model 'lazy'; choose one of: sim:diligent"
    ):
        model_from_spec("sim:lazy", domain=domain)
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-4o'; use sim:NAME"):
        model_from_spec("gpt-4o", domain=domain)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        model_from_spec("openai:gpt-4o-mini", domain=domain)
