"""StreamOptions.patched: pi's patch semantics (reference §5.6)."""

from __future__ import annotations

from hooks import UNSET, StreamOptions, StreamOptionsPatch

BASE = StreamOptions(
    timeout_s=30.0,
    max_retries=5,
    max_retry_delay_s=10.0,
    headers={"x-a": "1", "x-b": "2"},
    metadata={"user_id": "u", "team": "t"},
    cache_retention="long",
)


def test_an_empty_patch_changes_nothing() -> None:
    patch = StreamOptionsPatch()

    assert {getattr(patch, f) for f in ("timeout_s", "headers", "cache_retention")} == {UNSET}
    assert BASE.patched(patch) == BASE


def test_scalars_given_are_replaced_and_none_resets() -> None:
    patched = BASE.patched(
        StreamOptionsPatch(timeout_s=None, max_retries=0, cache_retention="none")
    )

    assert patched.timeout_s is None
    assert patched.max_retries == 0
    assert patched.cache_retention == "none"
    assert patched.max_retry_delay_s == 10.0  # not given: kept


def test_headers_and_metadata_merge_per_key() -> None:
    patched = BASE.patched(
        StreamOptionsPatch(headers={"x-b": "3", "x-c": "4"}, metadata={"extra": [1]})
    )

    assert patched.headers == {"x-a": "1", "x-b": "3", "x-c": "4"}
    assert patched.metadata == {"user_id": "u", "team": "t", "extra": [1]}


def test_a_key_set_to_none_deletes_it() -> None:
    patched = BASE.patched(
        StreamOptionsPatch(headers={"x-a": None, "x-missing": None}, metadata={"team": None})
    )

    assert patched.headers == {"x-b": "2"}
    assert patched.metadata == {"user_id": "u"}


def test_a_map_set_to_none_clears_it() -> None:
    patched = BASE.patched(StreamOptionsPatch(headers=None))

    assert patched.headers == {}
    assert patched.metadata == BASE.metadata  # the other map is kept


def test_patching_leaves_the_original_alone() -> None:
    BASE.patched(StreamOptionsPatch(headers={"x-a": None}, max_retries=1))

    assert BASE.headers == {"x-a": "1", "x-b": "2"}
    assert BASE.max_retries == 5
