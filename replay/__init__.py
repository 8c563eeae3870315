"""replay: placeholder package; built by later issues."""

__all__: list[str] = []
