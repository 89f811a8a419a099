"""Trace: the JSON form of a schedule; what it accepts, what it refuses, what identifies it."""

import json

import pytest

import tilegraph as tg
from tilegraph.schedule.trace import TRACE_VERSION, Instruction, Trace, canonical_trace_json, trace_hash


def _trace():
    return Trace("k" * 24, (Instruction("sample_tile", {"loop": "i", "n": 2}, ("v0", "v1"), [3, 4]),
                            Instruction("split", {"loop": "i", "factors": [{"rv": "v0"}, {"rv": "v1"}]}, ("i_0", "i_1"))),
                 names=("A", "i"))


def test_json_round_trip_and_decisions():
    t = _trace()
    assert Trace.from_json(t.to_json()) == t and Trace.from_json(t.to_dict()) == t
    assert t.decisions == {0: [3, 4]} and len(t) == 2
    assert t.with_decision(0, [2, 6]).instructions[0].decision == [2, 6] and t.decisions == {0: [3, 4]}
    with pytest.raises(tg.ScheduleError, match="not a sampling instruction"):
        t.with_decision(1, [1])


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"), ("[]", "must be an object"), ('{"instructions": 1, "workload_key": "k"}', "must be a list"),
    ('{"instructions": [], "workload_key": "k", "version": 99}', "version 99"),
    ('{"instructions": [{"inputs": {}}], "workload_key": "k", "version": 1}', "malformed trace instruction"),
    ('{"instructions": [], "workload_key": "k", "version": 1, "names": [1]}', "names"),
    ("[" * 100_000, "nested too deeply|not valid JSON"),
])
def test_malformed_traces_are_schedule_errors(text, message):
    with pytest.raises(tg.ScheduleError, match=message):
        Trace.from_json(text)


def test_identity_ignores_whitespace_key_order_and_names():
    t = _trace()
    d = t.to_dict()
    d["names"] = ["X", "m"]
    spaced = json.dumps(d, indent=3)
    assert trace_hash(spaced) == trace_hash(t.to_json())
    assert canonical_trace_json(spaced) == canonical_trace_json(t.to_json())
    assert '"names"' in canonical_trace_json(spaced, keep_names=True)
    assert trace_hash(t.with_decision(0, [2, 6]).to_json()) != trace_hash(t.to_json())
    assert TRACE_VERSION == 1
