"""Readers of other agents' transcripts, converted to our sessions (``claude_code``)."""
