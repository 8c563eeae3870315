"""Model specs on the command line: `sim:NAME` or `openai:MODEL`."""

from __future__ import annotations

from plangate.harness._errors import ConfigError
from plangate.harness.domains import Domain
from plangate.harness.models._endpoint import EndpointSettings
from plangate.harness.models._model import Model
from plangate.harness.models._simulated import BEHAVIOURS, SimulatedModel


def model_from_spec(
    spec: str,
    *,
    domain: Domain,
    seed: int = 0,
    endpoint: EndpointSettings | None = None,
    ids_after: int = 0,
) -> Model:
    """Build the model a spec names.

    `sim:NAME` is a simulated model (NAME one of `BEHAVIOURS`) over the domain's tasks;
    `openai:MODEL` is an OpenAI-compatible endpoint, with its base URL and key from the
    environment (`PLANGATE_OPENAI_BASE_URL`, `PLANGATE_OPENAI_API_KEY`, or the `OPENAI_`
    equivalents) and its patience from `endpoint`, else the environment. A simulated model's
    tool-call ids start after `ids_after` (the calls a replayed turn's history already holds).
    """
    kind, _, name = spec.partition(":")
    if kind == "sim":
        if name not in BEHAVIOURS:
            raise ConfigError(
                f"unknown simulated model {name!r}; choose one of: "
                + ", ".join(f"sim:{b}" for b in BEHAVIOURS)
            )
        return SimulatedModel(name, domain.tasks, seed=seed, ids_after=ids_after)  # type: ignore[arg-type]
    if kind == "openai" and name:
        from plangate.harness.models._openai import OpenAIModel

        return OpenAIModel.from_env(name, endpoint)
    raise ConfigError(
        f"unknown model {spec!r}; use sim:NAME (NAME one of {', '.join(BEHAVIOURS)}) "
        "or openai:MODEL"
    )
