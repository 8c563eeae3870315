"""An `openai:` model's patience: settings passed in win over the environment, which wins over
the defaults; every bad value is a `ConfigError` naming it."""

from __future__ import annotations

import pytest

from plangate.harness import ConfigError, EndpointSettings, get_domain, model_from_spec
from plangate.harness.models import OpenAIModel


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    for variable in ("PLANGATE_MODEL_TIMEOUT", "PLANGATE_MODEL_RETRIES", "PLANGATE_MODEL_DEADLINE"):
        monkeypatch.delenv(variable, raising=False)


def patience(model: object) -> tuple[float, int, float | None]:
    assert isinstance(model, OpenAIModel)
    return model.timeout, model.max_retries, model.deadline


def test_defaults_then_the_environment_then_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    domain = get_domain("observability")
    assert patience(model_from_spec("openai:m", domain=domain)) == (60.0, 4, None)

    monkeypatch.setenv("PLANGATE_MODEL_TIMEOUT", "7")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "2")
    assert patience(model_from_spec("openai:m", domain=domain)) == (7.0, 2, None)

    chosen = EndpointSettings(retries=0, deadline=30)
    assert patience(model_from_spec("openai:m", domain=domain, endpoint=chosen)) == (7.0, 0, 30)


def test_over_fills_only_what_is_unset() -> None:
    flags = EndpointSettings(retries=0)
    gate_file = EndpointSettings(timeout=5, retries=3)
    assert flags.over(gate_file) == EndpointSettings(timeout=5, retries=0)
    assert EndpointSettings().over(gate_file) == gate_file


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"timeout": 0}, "model timeout must be a number of seconds > 0, not 0"),
        ({"deadline": -1.5}, "model deadline must be a number of seconds > 0, not -1.5"),
        ({"timeout": True}, "model timeout must be a number of seconds > 0, not True"),
        ({"retries": -1}, "model retries must be a whole number >= 0, not -1"),
        ({"retries": 2.5}, "model retries must be a whole number >= 0, not 2.5"),
    ],
)
def test_a_bad_setting_is_named(settings: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        EndpointSettings(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["0", "-3", "soon", "inf", "nan"])
def test_a_bad_environment_value_is_named(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("PLANGATE_MODEL_DEADLINE", text)
    with pytest.raises(ConfigError, match=f"PLANGATE_MODEL_DEADLINE='{text}'"):
        EndpointSettings.from_env()
