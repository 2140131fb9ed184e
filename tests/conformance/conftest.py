"""The conformance suite (``repos.testing``) runs on our repos from ``test_our_repos.py``."""
