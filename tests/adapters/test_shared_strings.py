"""The watch caches share the strings of the objects they hold (``shared_strings``): two objects
decoded apart end up with one copy of each field name and short value, and stay equal to what
was decoded."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podwright.adapters.kubernetes.reflector import (
    SHARED_STRING_LENGTH,
    WatchCache,
    shared_strings,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_the_value_is_unchanged(value: Any) -> None:
    assert shared_strings(json.loads(json.dumps(value))) == value


def test_objects_decoded_apart_share_their_keys_and_short_strings() -> None:
    text = json.dumps(
        {"metadata": {"name": "train-1"}, "status": {"phase": "Running", "message": "x" * 100}}
    )
    first, second = (shared_strings(json.loads(text)) for _ in range(2))
    (first_key,) = first["metadata"]
    (second_key,) = second["metadata"]
    assert first_key is second_key
    assert first["status"]["phase"] is second["status"]["phase"]
    assert first["metadata"]["name"] is second["metadata"]["name"]
    long_first, long_second = first["status"]["message"], second["status"]["message"]
    assert len(long_first) > SHARED_STRING_LENGTH
    assert long_first is not long_second  # long strings are left as they were decoded


def test_a_watch_cache_keeps_objects_with_shared_strings() -> None:
    cache = WatchCache()
    text = '{"metadata": {"namespace": "ml", "name": "a"}, "status": {"phase": "Running"}}'
    cache.replace([json.loads(text)])
    cache.apply("ADDED", json.loads(text.replace('"a"', '"b"')))
    first, second = (cache.get("ml", name) for name in ("a", "b"))
    assert first is not None
    assert second is not None
    assert first["status"]["phase"] is second["status"]["phase"]
