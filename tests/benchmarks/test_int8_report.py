"""benchmarks/int8.py's table: ratios against the peers from the raced medians, errors and the
count of integer products per model, a peer that did not run shown as '-'."""

from benchmarks import int8


def test_the_table_shows_ratios_errors_and_missing_peers():
    row = {"model": "resnet50", "integer_products": "53/54",
           "ms": {"tilegraph int8": 10.0, "tilegraph fp32": 15.0, "onnxruntime int8": 23.0, "onnxruntime fp32": 18.0},
           "errors": {"onnxruntime int8": {"tilegraph int8": 0.0077}, "onnxruntime fp32": {"tilegraph int8": 0.05}}}
    meta = {"command": "python -m benchmarks.run int8", "cpu": "cpu", "threads": 2, "date": "today"}
    text = int8._markdown([row], meta)
    line = next(x for x in text.splitlines() if x.startswith("| resnet50"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:6] == ["10.00", "15.00", "23.00", "18.00", "-"]  # OpenVINO did not run
    assert cells[6:9] == ["2.30x", "-", "1.50x"]
    assert cells[9:] == ["7.7e-03", "5.0e-02", "53/54"]
