"""Tools the model can call: the base types and the built-ins."""
