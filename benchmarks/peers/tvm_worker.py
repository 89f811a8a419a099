"""Runs inside the TVM venv (.venv-tvm): tune one canonical workload with MetaSchedule, time it, check it.

    .venv-tvm/bin/python benchmarks/peers/tvm_worker.py '{"op": "matmul", "params": {...}, "trials": 64, ...}'

Prints one JSON line on stdout (the last line): {"ok": true, "tuning_time_s", "trials", "rel_err",
"timings": [{"threads", "samples", "inner", ...}], "target": ...} or {"ok": false, "error": ...}.

Fixes from the peers research note (TVM 0.27): MetaSchedule lives in tvm.s_tir; targets are dicts;
each fresh build worker imports tvm.s_tir.tensor_intrin (~40 s on a small machine), longer than the
builder timeout, so the LocalBuilder pool initializer preloads it (initializers run without a timeout).
The workloads are written here in TVM te with the same definitions (and layouts) as the harness's
canonical ops, topi-style; timing uses the harness protocol (benchmarks/protocol.py, stdlib only).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _preload_tensor_intrin() -> None:
    import tvm.s_tir.tensor_intrin  # noqa: F401 - registers the intrinsics the default build needs


def _conv_out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _pad_nhwc(te, data, pad: int):  # noqa: ANN001, ANN202
    if pad == 0:
        return data
    n, h, w, c = data.shape
    import tvm

    return te.compute(
        (n, h + 2 * pad, w + 2 * pad, c),
        lambda b, y, x, ch: tvm.tirx.if_then_else(
            tvm.tirx.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[b, y - pad, x - pad, ch],
            tvm.tirx.const(0.0, "float32")),
        name="pad")


def define(op: str, p: dict[str, int]) -> list:  # noqa: C901 - one branch per op
    """TVM te tensors [inputs..., output] of a canonical op."""
    from tvm import te

    f32 = "float32"
    if op == "matmul":
        a = te.placeholder((p["M"], p["K"]), f32, name="a")
        b = te.placeholder((p["K"], p["N"]), f32, name="b")
        k = te.reduce_axis((0, p["K"]), name="k")
        return [a, b, te.compute((p["M"], p["N"]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")]
    if op == "batch_matmul":
        a = te.placeholder((p["B"], p["M"], p["K"]), f32, name="a")
        b = te.placeholder((p["B"], p["K"], p["N"]), f32, name="b")
        k = te.reduce_axis((0, p["K"]), name="k")
        return [a, b, te.compute((p["B"], p["M"], p["N"]),
                                 lambda bb, i, j: te.sum(a[bb, i, k] * b[bb, k, j], axis=k), name="c")]
    if op in ("conv2d_nhwc", "depthwise_conv2d_nhwc"):
        depthwise = op == "depthwise_conv2d_nhwc"
        ci = p["C"] if depthwise else p["CI"]
        co = p["C"] if depthwise else p["CO"]
        kh = p["K"] if depthwise else p["KH"]
        kw = p["K"] if depthwise else p["KW"]
        dil = 1 if depthwise else p["dilation"]
        groups = ci if depthwise else p["groups"]
        stride, pad = p["stride"], p["pad"]
        data = te.placeholder((p["N"], p["H"], p["W"], ci), f32, name="data")
        wshape = (kh, kw, ci, 1) if depthwise else (kh, kw, ci // groups, co)
        weight = te.placeholder(wshape, f32, name="weight")
        oh, ow = _conv_out(p["H"], kh, stride, pad, dil), _conv_out(p["W"], kw, stride, pad, dil)
        padded = _pad_nhwc(te, data, pad)
        r = te.reduce_axis((0, kh), name="r")
        s = te.reduce_axis((0, kw), name="s")
        if depthwise:
            out = te.compute((p["N"], oh, ow, co), lambda n, y, x, c: te.sum(
                padded[n, y * stride + r, x * stride + s, c] * weight[r, s, c, 0], axis=[r, s]), name="out")
            return [data, weight, out]
        cig, cog = ci // groups, co // groups
        rc = te.reduce_axis((0, cig), name="rc")
        out = te.compute((p["N"], oh, ow, co), lambda n, y, x, f: te.sum(
            padded[n, y * stride + r * dil, x * stride + s * dil, f // cog * cig + rc] * weight[r, s, rc, f],
            axis=[r, s, rc]), name="out")
        return [data, weight, out]
    if op == "softmax":
        x = te.placeholder((p["M"], p["N"]), f32, name="x")
        k = te.reduce_axis((0, p["N"]), name="k")
        mx = te.compute((p["M"],), lambda i: te.max(x[i, k], axis=k), name="row_max")
        ex = te.compute((p["M"], p["N"]), lambda i, j: te.exp(x[i, j] - mx[i]), name="exp")
        k2 = te.reduce_axis((0, p["N"]), name="k2")
        sm = te.compute((p["M"],), lambda i: te.sum(ex[i, k2], axis=k2), name="row_sum")
        return [x, te.compute((p["M"], p["N"]), lambda i, j: ex[i, j] / sm[i], name="out")]
    if op == "norm":
        x = te.placeholder((p["B"], p["M"], p["N"]), f32, name="x")
        i = te.reduce_axis((0, p["M"]), name="i")
        j = te.reduce_axis((0, p["N"]), name="j")
        ss = te.compute((p["B"],), lambda b: te.sum(x[b, i, j] * x[b, i, j], axis=[i, j]), name="sumsq")
        return [x, te.compute((p["B"],), lambda b: te.sqrt(ss[b]), name="out")]
    raise ValueError(f"op {op!r} has no TVM te definition in tvm_worker.py")


def _set_threads(n: int) -> bool:
    import tvm_ffi

    config = tvm_ffi.get_global_func("runtime.config_threadpool", allow_missing=True)
    if config is None:
        return False
    config(1, n)  # affinity mode 1 = "big" cores, n worker threads
    return True


def run(request: dict) -> dict:
    import numpy as np
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    sys.path.insert(0, REPO)
    from benchmarks import protocol, suites

    case = suites.BenchCase("tvm", request.get("name", request["op"]), request["op"], request["params"])
    mcpu = request.get("mcpu") or str(tvm.target.codegen.llvm_get_system_cpu())
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": int(request.get("num_cores", 2))})
    tensors = define(case.op, case.params)
    mod = tvm.IRModule({"main": te.create_prim_func(tensors).with_attr("global_symbol", "main")})
    trials = int(request["trials"])
    work_dir = request.get("work_dir") or tempfile.mkdtemp(prefix="tg-bench-tvm-")
    start = time.perf_counter()
    builder = ms.builder.LocalBuilder(timeout_sec=60, initializer=_preload_tensor_intrin)
    db = ms.tune_tir(mod=mod, target=target, work_dir=work_dir, max_trials_global=trials,
                     num_trials_per_iter=min(64, trials), builder=builder, seed=int(request.get("seed", 0)))
    sch = ms.tir_integration.compile_tir(db, mod, target)
    if sch is None:
        return {"ok": False, "error": "MetaSchedule found no valid schedule"}
    lib = tvm.compile(sch.mod, target=target)
    tuning_time_s = time.perf_counter() - start
    records = len(db.get_all_tuning_records()) if hasattr(db, "get_all_tuning_records") else trials

    dev = tvm.cpu(0)
    inputs = suites.canonical_inputs(case, int(request.get("seed", 0)))
    refs = suites.reference(case, inputs)
    out_shape = tuple(int(s) for s in tensors[-1].shape)
    args = [tvm.runtime.tensor(a, dev) for a in inputs]
    out = tvm.runtime.tensor(np.full(out_shape, np.nan, dtype="float32"), dev)
    func = lib["main"]
    func(*args, out)
    rel_err = suites.relative_error([out.numpy()], refs)
    timings = []
    for n in request.get("threads", [1]):
        note = "" if _set_threads(int(n)) else "runtime.config_threadpool missing: TVM's default thread count"
        t = protocol.measure_interleaved([protocol.System("tvm", lambda: func(*args, out))],
                                         rounds=int(request.get("rounds", 5)),
                                         min_sample_s=float(request.get("min_sample_s", 0.05)), settle_s=0.0)["tvm"]
        timings.append({"threads": int(n), "note": note, **t.to_dict()})
    return {"ok": True, "tuning_time_s": tuning_time_s, "trials": trials, "records": records, "rel_err": rel_err,
            "target": str(target), "timings": timings}


def main() -> None:
    request = json.loads(sys.argv[1])
    try:
        result = run(request)
    except Exception as exc:  # noqa: BLE001 - the parent reads the error from the JSON line
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
