"""Stack configuration: pydantic models, validation and the places settings are read from."""
