"""The JSONL backend: one append-only file per session."""
