"""A real local model server for the `llm` test tier and offline runs (see `llamacpp`)."""
