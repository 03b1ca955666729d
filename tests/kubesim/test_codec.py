"""kubesim.codec: orjson for speed, and the standard library's answers where orjson refuses."""

from __future__ import annotations

import json

import pytest

from kubesim import codec


def test_dumps_is_compact_utf8_json() -> None:
    assert codec.dumps({"a": [1, "ü"], "b": None}) == '{"a":[1,"ü"],"b":null}'.encode()


def test_integers_beyond_64_bits_round_trip_through_the_fallback() -> None:
    big = 2**70
    assert codec.loads(b'{"n": %d}' % big) == {"n": big}
    assert json.loads(codec.dumps({"n": big})) == {"n": big}
    assert codec.clone({"n": [big]}) == {"n": [big]}


def test_clone_shares_no_containers() -> None:
    value = {"a": {"b": [1, {"c": 2}]}}
    copied = codec.clone(value)
    assert copied == value
    copied["a"]["b"][1]["c"] = 3
    assert value["a"]["b"][1]["c"] == 2


def test_loads_rejects_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        codec.loads(b"{nope")
