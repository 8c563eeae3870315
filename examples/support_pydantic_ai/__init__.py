"""The support desk on pydantic-ai: `python:examples.support_pydantic_ai.agent:make`."""
