"""Harness variants: the shipped files, and every mistake a variant file can hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from plangate.harness import (
    ConfigError,
    PlangateError,
    Variant,
    builtin_variants,
    load_variant,
    parse_variant,
)
from plangate.harness._variant import GuardSettings, PlanSettings, TurnSettings

SHIPPED = ["alyx", "harness-plan", "naive", "todo-basic"]
NO_GUARDS = GuardSettings(nudge=False, continuation=False, loop_guard=False)


def test_the_four_designed_variants_ship() -> None:
    assert set(SHIPPED) <= set(builtin_variants())
    assert builtin_variants() == sorted(builtin_variants())


@pytest.mark.parametrize("name", builtin_variants())
def test_every_shipped_variant_loads_under_its_own_name(name: str) -> None:
    variant = load_variant(name)
    assert variant.name == name
    assert variant.description.strip()


def test_naive_has_no_plan_ends_on_text_and_has_no_guards() -> None:
    variant = load_variant("naive")
    assert variant.plan.dialect == "none"
    assert variant.plan.message == "none"
    assert variant.turn.ending == "text"
    assert variant.turn.finish_gate is False
    assert variant.turn.forced_finish is False
    assert variant.turn.iteration_warning == 0
    assert variant.guards == NO_GUARDS


def test_todo_basic_has_two_statuses_in_history_and_ends_on_text() -> None:
    variant = load_variant("todo-basic")
    assert variant.plan.dialect == "todo"
    assert variant.plan.statuses == "two"
    assert variant.plan.message == "history"
    assert variant.turn.ending == "text"
    assert variant.turn.finish_gate is False
    assert variant.guards == NO_GUARDS


def test_alyx_is_the_full_design() -> None:
    assert load_variant("alyx") == Variant(
        name="alyx",
        description=load_variant("alyx").description,
        plan=PlanSettings(
            dialect="todo",
            statuses="four",
            message="pinned",
            status_reminder=True,
            trigger="action_verbs",
        ),
        turn=TurnSettings(
            ending="finish_tool",
            finish_gate=True,
            max_bounces=3,
            max_iterations=30,
            iteration_warning=3,
            forced_finish=True,
        ),
        guards=GuardSettings(
            nudge=True,
            continuation=True,
            loop_guard=True,
            loop_warn_after=3,
            loop_stop_after=5,
            loop_compare_results=True,
        ),
    )


def test_harness_plan_lets_the_harness_own_the_plan() -> None:
    variant = load_variant("harness-plan")
    assert variant.plan.dialect == "harness"
    assert variant.plan.message == "pinned"
    assert variant.turn.ending == "finish_tool"
    assert variant.turn.finish_gate is True
    assert (variant.guards.nudge, variant.guards.continuation, variant.guards.loop_guard) == (
        True,
        True,
        True,
    )


def test_a_variant_with_only_a_name_is_the_alyx_defaults() -> None:
    assert parse_variant('name = "mine"') == Variant(name="mine")


# --- mistakes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            'name = "x"\ncolour = "red"',
            "v.toml: unknown key 'colour'; allowed keys: context, description, guards, name, plan, tools, turn",
        ),
        (
            'name = "x"\n[plan]\ndialekt = "todo"',
            "v.toml: unknown key 'plan.dialekt'; allowed keys in [plan]: "
            "approve_plan, dialect, max_plan_steps, message, status_reminder, statuses, "
            "strict_dependencies, trigger",
        ),
        (
            'name = "x"\n[guards]\nloop = true',
            "v.toml: unknown key 'guards.loop'; allowed keys in [guards]: "
            "continuation, loop_compare_results, loop_guard, loop_stop_after, loop_warn_after, "
            "nudge",
        ),
        (
            'name = "x"\n[plan]\ndialect = "todos"',
            "v.toml: 'plan.dialect' is 'todos'; allowed values: 'none', 'todo', 'harness', 'dependency'",
        ),
        (
            'name = "x"\n[turn]\nending = "tool"',
            "v.toml: 'turn.ending' is 'tool'; allowed values: 'text', 'finish_tool'",
        ),
        (
            'name = "x"\n[turn]\nmax_iterations = "30"',
            "v.toml: 'turn.max_iterations' must be a whole number >= 0, not '30'",
        ),
        (
            'name = "x"\n[turn]\nmax_iterations = 30.0',
            "v.toml: 'turn.max_iterations' must be a whole number >= 0, not 30.0",
        ),
        (
            'name = "x"\n[turn]\nmax_bounces = true',
            "v.toml: 'turn.max_bounces' must be a whole number >= 0, not True",
        ),
        (
            'name = "x"\n[turn]\nmax_bounces = -1',
            "v.toml: 'turn.max_bounces' must be a whole number >= 0, not -1",
        ),
        (
            'name = "x"\n[guards]\nnudge = 1',
            "v.toml: 'guards.nudge' must be true or false, not 1",
        ),
        (
            'name = "x"\n[plan]\nstatus_reminder = "yes"',
            "v.toml: 'plan.status_reminder' must be true or false, not 'yes'",
        ),
        ("name = 5", "v.toml: 'name' must be a string, not 5"),
        ('name = "x"\ndescription = ["a"]', "v.toml: 'description' must be a string, not ['a']"),
        ('name = "x"\nplan = "todo"', "v.toml: 'plan' must be a table ([plan])"),
        ('description = "no name"', "v.toml: missing key 'name' (the variant's name)"),
    ],
    ids=lambda v: v.splitlines()[-1][:40] if isinstance(v, str) else v,
)
def test_a_mistake_is_a_config_error_naming_file_and_key(source: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_variant(source, "v.toml")
    assert str(raised.value) == message


def test_invalid_toml_names_the_file() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_variant('name = "x"\n[plan\ndialect = "todo"', "variants/mine.toml")
    assert str(raised.value).startswith("variants/mine.toml: not valid TOML: ")


def test_the_default_file_name_is_named_too() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_variant("")
    assert str(raised.value) == "<variant>: missing key 'name' (the variant's name)"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "[guards]\nloop_warn_after = 5\nloop_stop_after = 5",
            "'guards.loop_warn_after' must be at least 2 and below 'guards.loop_stop_after'",
        ),
        (
            "[guards]\nloop_warn_after = 6",
            "'guards.loop_warn_after' must be at least 2 and below 'guards.loop_stop_after'",
        ),
        (
            "[guards]\nloop_warn_after = 1",
            "'guards.loop_warn_after' must be at least 2 and below 'guards.loop_stop_after'",
        ),
        (
            '[plan]\ndialect = "harness"\n[turn]\nending = "text"',
            "'plan.dialect = \"harness\"' needs 'turn.ending = \"finish_tool\"'",
        ),
        (
            "[turn]\nmax_iterations = 5\niteration_warning = 5",
            "'turn.iteration_warning' must be smaller than 'turn.max_iterations'",
        ),
        (
            "[turn]\nmax_iterations = 0\niteration_warning = 0",
            "'turn.max_iterations' must be at least 1; "
            "'turn.iteration_warning' must be smaller than 'turn.max_iterations'",
        ),
    ],
)
def test_inconsistent_settings_are_config_errors(source: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_variant(f'name = "x"\n{source}', "v.toml")
    assert str(raised.value) == f"v.toml: {message}"


def test_loop_thresholds_are_not_checked_without_the_loop_guard() -> None:
    variant = parse_variant(
        'name = "x"\n[guards]\nloop_guard = false\nloop_warn_after = 9\nloop_stop_after = 1'
    )
    assert variant.guards.loop_stop_after == 1


def test_a_config_error_is_a_plangate_error() -> None:
    assert issubclass(ConfigError, PlangateError)


# --- loading -------------------------------------------------------------------------------


def test_load_variant_of_an_unknown_name_lists_the_choices() -> None:
    with pytest.raises(ConfigError) as raised:
        load_variant("alyks")
    assert str(raised.value) == (
        f"unknown variant 'alyks'; choose one of: {', '.join(builtin_variants())} "
        "(or give a path to a .toml file)"
    )
    assert "alyx, alyx-context, flux, flux-review, harness-plan, naive, todo-basic" in str(
        raised.value
    )


def test_load_variant_of_a_file_path(tmp_path: Path) -> None:
    path = tmp_path / "fast.toml"
    path.write_text('name = "fast"\n[turn]\nmax_iterations = 8\n', encoding="utf-8")
    for given in (path, str(path)):
        variant = load_variant(given)
        assert variant.name == "fast"
        assert variant.turn.max_iterations == 8
        assert variant.plan == PlanSettings()


def test_load_variant_of_an_existing_file_without_toml_suffix(tmp_path: Path) -> None:
    path = tmp_path / "variant.conf"
    path.write_text('name = "conf"\n', encoding="utf-8")
    assert load_variant(path).name == "conf"


def test_load_variant_errors_name_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('name = "b"\n[plan]\ndialekt = "todo"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_variant(path)
    assert str(raised.value).startswith(f"{path}: unknown key 'plan.dialekt'; ")


def test_load_variant_of_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(ConfigError) as raised:
        load_variant(path)
    assert str(raised.value) == f"cannot read variant file {path}: No such file or directory"
