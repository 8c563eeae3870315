"""Agents written on real frameworks, recorded, replayed and gated through plangate's boundary.

- `support_desk`: the support desk both examples share (its tools, its state, a task list);
- `telemetry`: where both send their spans (the OTLP endpoint plangate gives each turn);
- `support_openai_agents`: the desk on the OpenAI Agents SDK (`Agent`, `Runner.run`);
- `support_pydantic_ai`: the desk on pydantic-ai (`Agent.run` with `message_history`).

Each is named from the repository's root, like `python:examples.support_pydantic_ai.agent:make`.
"""
