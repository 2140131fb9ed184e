"""Placeholder: filled in as the package grows."""
