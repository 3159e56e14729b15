"""Stack configuration: pydantic models, validation, where settings are read from, and upstream facts."""
