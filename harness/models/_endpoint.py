"""An `openai:` model's patience: per-attempt timeout, retries, and a total deadline per call.

One record, `EndpointSettings`, carries them from wherever they are set (a command's flags, a
gate file's `[gate]` table) through `replay_turn` and `model_from_spec` to the model, so that
no library code changes the process's environment. What a record leaves unset comes from the
environment (`PLANGATE_MODEL_TIMEOUT`, `PLANGATE_MODEL_RETRIES`, `PLANGATE_MODEL_DEADLINE`),
then from the defaults. Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from plangate.harness._errors import ConfigError

TIMEOUT_VARIABLE = "PLANGATE_MODEL_TIMEOUT"
"""Seconds one attempt may take (`OpenAIModel.timeout`)."""
RETRIES_VARIABLE = "PLANGATE_MODEL_RETRIES"
"""Retries after the first attempt (`OpenAIModel.max_retries`)."""
DEADLINE_VARIABLE = "PLANGATE_MODEL_DEADLINE"
"""Seconds all attempts of one call may take together (`OpenAIModel.deadline`)."""
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSettings:
    """How patient an `openai:` model is; a field left None is read from the environment."""

    timeout: float | None = None
    """Seconds one attempt may take (> 0; default 60)."""
    retries: int | None = None
    """Retries after a failed attempt: 429, 5xx, timeouts (>= 0; default 4)."""
    deadline: float | None = None
    """Seconds all attempts of one call may take, waits included (> 0; default no limit)."""

    def __post_init__(self) -> None:
        for name in ("timeout", "deadline"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, int | float) and not isinstance(value, bool) and value > 0
            ):
                raise ConfigError(f"model {name} must be a number of seconds > 0, not {value!r}")
        if self.retries is not None and (
            isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0
        ):
            raise ConfigError(f"model retries must be a whole number >= 0, not {self.retries!r}")

    def over(self, other: EndpointSettings) -> EndpointSettings:
        """These settings, with `other`'s wherever these are unset."""
        return EndpointSettings(
            **{
                f.name: getattr(other, f.name)
                if getattr(self, f.name) is None
                else getattr(self, f.name)
                for f in dataclasses.fields(self)
            }
        )

    @classmethod
    def from_env(cls) -> EndpointSettings:
        """The settings the environment holds (a bad value is a `ConfigError` naming it)."""
        retries = _number(RETRIES_VARIABLE, int)
        return cls(
            timeout=_number(TIMEOUT_VARIABLE, float),
            retries=None if retries is None else int(retries),
            deadline=_number(DEADLINE_VARIABLE, float),
        )


def _number(variable: str, kind: type[float] | type[int]) -> float | None:
    """A number from the environment (None when unset); a bad one is a `ConfigError`."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if value < 0 or (kind is float and (value == 0 or not math.isfinite(value))):
        least = "a number of seconds > 0" if kind is float else "a whole number >= 0"
        raise ConfigError(f"{variable}={text!r}: must be {least}")
    return float(value)
