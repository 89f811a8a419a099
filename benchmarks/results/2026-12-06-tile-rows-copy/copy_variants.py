"""A GEMM-like workload's best record with its tile-rows copy of x re-scheduled by hand, timed.

    python copy_variants.py conv2d_nhwc:1,28,28,512,256,1,1,0 DB.db

DB holds a gensor-tuned record of the workload that copies x (`tilegraph tune ... --strategy
gensor`). Variants: the record as it is, x read in place, and the copy's pixel loops parallel with
the channels outside or inside the tile's rows. 3 rounds of 50 calls each, 2 threads.
"""

import json
import sys
import time

import numpy as np

import tilegraph as tg
from tilegraph import workloads
from tilegraph.schedule import Schedule, Trace
from tilegraph.tune.database import SQLiteDatabase


def _inst(kind: str, outputs: tuple[str, ...] = (), **inputs: object) -> dict:
    return {"kind": kind, "inputs": inputs, "outputs": list(outputs), "decision": None}


def main(spec: str, db_path: str) -> None:
    wl, target = workloads.from_spec(spec), tg.Target("cpu")
    trace = json.loads(SQLiteDatabase(db_path).best(wl.key, target.fingerprint).trace_json)
    insts = trace["instructions"]
    at = next(j for j, x in enumerate(insts) if x["kind"] == "cache_read" and x["inputs"]["buffer"] == "x")
    copy = insts[: at + 1]
    fuse = _inst("fuse", ("ax0_ax1_ax2_fused",), loops=["ax0", "ax1", "ax2"])
    parallel = _inst("parallel", loop="ax0_ax1_ax2_fused")
    variants = {
        "packed": insts,
        "unpacked": insts[:at],
        "fuse3": [*copy, fuse, parallel],
        "fuse3_cinner": [*copy, _inst("reorder", loops=["ax0", "ax1", "ax2", "ax4", "ax5", "ax3"]), fuse, parallel],
    }
    kernels = {name: tg.build(Schedule.replay(wl, Trace.from_json(json.dumps({**trace, "instructions": v}))), target)
               for name, v in variants.items()}
    args = [np.random.rand(*b.shape).astype(np.float32) for b in kernels["packed"].inputs]
    reference = kernels["unpacked"](*args)
    for name, kernel in kernels.items():
        print(name, "max diff", float(np.abs(kernel(*args) - reference).max()))
    for _ in range(3):
        for name, kernel in kernels.items():
            for _ in range(10):
                kernel(*args, num_threads=2)
            samples = []
            for _ in range(50):
                start = time.perf_counter()
                kernel(*args, num_threads=2)
                samples.append(time.perf_counter() - start)
            print(name, round(float(np.median(samples)) * 1e3, 3), "ms")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
