"""Compile an ONNX model with no budget under a given hardware model, in fresh caches and database.

    python compile_with_model.py HW.json MODEL.onnx OUT.tg

The hardware model's JSON is put where the host's measured one is cached (its fingerprint's file
in a fresh TILEGRAPH_CACHE_DIR), so Gensor's construction reads those numbers; the build cache and
database are fresh too. Used to compare what different measured numbers pick on one machine.
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(hw_json: str, onnx_path: str, out: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="tg_hwab_"))
    os.environ["TILEGRAPH_CACHE_DIR"] = str(root / "cache")
    os.environ["TILEGRAPH_DATA_DIR"] = str(root / "data")
    import tilegraph as tg
    from tilegraph.tune.hardware import hardware_model

    numbers = json.loads(Path(hw_json).read_text())
    fingerprint = str(tg.Target("cpu").fingerprint)
    cached = root / "cache" / "hardware" / f"{fingerprint}.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(dict(numbers, fingerprint=fingerprint)))
    hw = hardware_model(tg.Target("cpu"))
    assert hw.bandwidth_bytes == numbers["bandwidth_bytes"], "the hardware model was not read from the file"
    began = time.perf_counter()
    model = tg.compile(onnx_path, num_threads=2)
    print(f"{out}: compiled in {time.perf_counter() - began:.1f} s under L1 {hw.bandwidth('l1') / 1e9:.0f}, "
          f"L2 {hw.bandwidth('l2') / 1e9:.0f} GB/s, peak {hw.peak_flops(2) / 1e9:.0f} GFLOP/s")
    model.save(out)


if __name__ == "__main__":
    main(*sys.argv[1:])
