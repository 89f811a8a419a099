"""tune/database/validate.py: what an imported or merged record must satisfy."""

import json

import pytest

from tilegraph.tune.database import Record
from tilegraph.tune.database.validate import check_record

TRACE = json.dumps({"version": 1, "workload_key": "wk", "instructions": [
    {"kind": "split", "inputs": {"loop": "i", "factors": [None, 4]}, "outputs": ["i_0", "i_1"]}]})


def _rec(**changes):
    fields = {"workload_key": "wk", "target_fingerprint": "fp", "trace_json": TRACE, "kind": "ok", "latency_s": 1e-3,
              "samples": (1e-3,)}
    fields.update(changes)
    return Record(**fields)


def test_a_record_tilegraph_could_have_written_passes():
    check_record(_rec(), {"wk"})


@pytest.mark.parametrize("record, message", [
    (_rec(workload_key="other"), "without that workload"),
    (_rec(latency_s=float("inf")), "latency_s"),
    (_rec(latency_s=-1.0), "latency_s"),
    (_rec(samples=(float("nan"),)), "a sample"),
    (_rec(trace_json="{"), "bad trace"),
    (_rec(trace_json=TRACE.replace("split", "teleport")), "unknown primitive"),
    (_rec(trace_json=TRACE.replace("4]", "0]")), "not positive"),
    (_rec(trace_json=TRACE.replace("4]", "99999999999]")), "beyond 32 bits"),
    (_rec(trace_json=TRACE.replace('"wk"', '"zz"')), "the trace names workload"),
])
def test_records_that_could_do_harm_are_refused(record, message):
    with pytest.raises(ValueError, match=message):
        check_record(record, {"wk"})
