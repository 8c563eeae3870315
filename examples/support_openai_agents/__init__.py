"""The support desk on the OpenAI Agents SDK: `python:examples.support_openai_agents.agent:make`."""
