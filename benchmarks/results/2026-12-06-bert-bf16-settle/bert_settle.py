"""BERT-base bf16 tuned 180 s with settling (a fresh database), against the same model untuned and
OpenVINO bf16, alternating in one process (see README.md)."""

import time

import numpy as np

import tilegraph as tg
from tilegraph.cli.models import _resolve
from tilegraph.graph.precision import random_inputs
from tilegraph.graph.race import peer
from tilegraph.tune.database import SQLiteDatabase

TUNED_DB, EMPTY_DB = "/tmp/settle_data/tuning.db", "/tmp/settle_empty.db"


def main() -> None:
    path, _, _ = _resolve("bert")
    start = time.perf_counter()
    tuned = tg.compile(str(path), precision="bf16", time_budget=180, db=TUNED_DB)
    print("tuned compile", round(time.perf_counter() - start, 1), "s", flush=True)
    untuned = tg.compile(str(path), precision="bf16", db=EMPTY_DB)
    inputs = random_inputs(tuned.graph, seed=1)
    openvino, _ = peer("openvino.bf16", str(path), None, inputs, 2)
    systems = {"tuned": lambda: tuned.run(inputs), "untuned": lambda: untuned.run(inputs), "openvino.bf16": openvino}
    for call in systems.values():
        call()
        call()
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(7):
        for name, call in systems.items():
            n, begin = 0, time.perf_counter()
            while time.perf_counter() - begin < 1.0:
                call()
                n += 1
            times[name].append((time.perf_counter() - begin) / n * 1e3)
    median = {name: float(np.median(t)) for name, t in times.items()}
    print({name: (round(m, 2), round((max(times[name]) - min(times[name])) / m, 2)) for name, m in median.items()})
    print("tuned vs OV bf16", round(median["openvino.bf16"] / median["tuned"], 2),
          "untuned vs OV", round(median["openvino.bf16"] / median["untuned"], 2))
    db = SQLiteDatabase(TUNED_DB)
    fingerprint = tg.Target("cpu").fingerprint
    keys = {r.workload_key for r in db.records(target_fingerprint=fingerprint)}
    settled = [b for b in (db.best(k, fingerprint) for k in keys) if b is not None and b.meta.get("retimed")]
    print("tasks", len(keys), "best re-timed:", len(settled),
          [(round(b.latency_s * 1e3, 3), round(b.meta.get("recorded_s", 0) * 1e3, 3)) for b in settled])


if __name__ == "__main__":
    main()
