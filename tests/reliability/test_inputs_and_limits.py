"""Bad or extreme inputs get a clear refusal, never a crash or a silent change: items 7, 8, 9, 11,
12, 14 (build cache), 15 and 16 of the reliability issue, each reproduced first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilegraph as tg
from tests.reliability.conftest import refused, refused_in_subprocess
from tilegraph import te
from tilegraph.errors import ResourceError, ScheduleError


# ---------------------------------------------------------------- 7: factors and sizes past 32 bits
@pytest.mark.parametrize("factors", [[2**31, 1], [10**30, 1], [0, 8], [-2, 4], [True, 8], [2.0, 4]])
def test_split_refuses_factors_that_are_not_positive_or_beyond_the_index_range(factors):
    wl = tg.workloads.from_spec("matmul:8,8,8")
    sch = tg.Schedule(wl)
    before = sch.func
    with pytest.raises(ScheduleError, match="factors"):
        sch.split(sch.loops(wl.outputs[0])[0], factors)
    assert sch.func is before


def test_an_imported_record_with_a_huge_factor_cannot_reach_a_kernel():
    """The crash arrived through `tilegraph bench` of an imported record: such a trace no longer replays."""
    import json

    wl = tg.workloads.from_spec("matmul:8,8,8")
    trace = json.dumps({"version": 1, "workload_key": wl.key, "instructions": [
        {"kind": "split", "inputs": {"loop": "i", "factors": [2**31, 1]}, "outputs": ["i_0", "i_1"]}]})
    with pytest.raises(ScheduleError):
        tg.Schedule.replay(wl, trace)


def _enough_memory(nbytes: int) -> bool:
    from tilegraph.testing.data import available_memory

    have = available_memory()
    return have is None or have > nbytes


@pytest.mark.needs_cc
@pytest.mark.skipif(not _enough_memory(6 << 30), reason="needs about 4.3 GiB free for two 2**31-element arrays")
def test_a_tensor_of_more_than_2_to_the_31_elements_runs_with_64_bit_indices():
    n = 2**31 + 5
    a = te.placeholder((n,), "int8", name="A")
    c = te.compute((n,), lambda i: a[i] + te.const(1, "int8"), name="C")
    kernel = tg.build(tg.Workload(inputs=[a], outputs=[c]))
    assert "int64_t" in kernel.source
    x = np.zeros(n, np.int8)
    x[-1], x[2**31] = 7, -3
    out = kernel(x)
    assert out[-1] == 8 and out[2**31] == -2 and out[0] == 1
    del x, out


# ---------------------------------------------------------------- 8: targets the machine cannot be
@pytest.mark.parametrize("cores", ["100000", "10000"])
def test_more_cores_than_the_process_has_is_refused(capsys, dirs, cores):
    refused(capsys, ["tune", "matmul:32,32,32", "--target", f"cpu -cores={cores}"], "cores")
    with pytest.raises(ValueError, match="cores"):
        tg.Target("cpu", num_cores=int(cores))


# ---------------------------------------------------------------- 9: workloads too big for memory
@pytest.mark.parametrize("spec", ["matmul:100000,100000,100000", "matmul:1000000000,1000000000,1000000000"])
@pytest.mark.parametrize("command", ["tune", "bench"])
def test_a_workload_larger_than_memory_is_refused_before_allocating(spec, command, dirs):
    refused_in_subprocess([command, spec, "--db", str(dirs / "t.db")], "GiB", timeout=60)


def test_tune_api_refuses_a_workload_larger_than_memory(dirs):
    with pytest.raises(ResourceError, match="GiB"):
        tg.tune("matmul:100000,100000,100000", trials=1, progress=False, db=str(dirs / "t.db"))


# ---------------------------------------------------------------- 11: tg.build(db=...)
@pytest.mark.needs_cc
def test_build_uses_the_database_at_a_path(dirs, tuned_db):
    from tilegraph.tune.database import SQLiteDatabase

    wl = tg.workloads.from_spec("matmul:8,8,8")
    with SQLiteDatabase(tuned_db, readonly=True) as db:
        tuned = db.best_schedule(wl, tg.Target())
    assert tuned is not None
    by_path = tg.build(wl, db=str(tuned_db))
    default = tg.build(wl)
    assert by_path.source == tg.build(tuned).source != default.source


@pytest.mark.parametrize("db", [12345, 3.5, object(), b"path"])
def test_build_refuses_a_db_that_is_neither_a_database_nor_a_path(db):
    with pytest.raises(TypeError, match="db must be"):
        tg.build(tg.workloads.from_spec("matmul:8,8,8"), db=db)


# ---------------------------------------------------------------- 12: shapes and dtypes taken literally
@pytest.mark.parametrize("shape, dtype, error", [
    ((2.5, 4), "float32", TypeError),
    (("4", 4), "float32", TypeError),
    ((4, 4), None, TypeError),
    ((10**30, 4), "float32", ValueError),
    ((0, 4), "float32", ValueError),
    ("44", "float32", TypeError),
    ((4,), "complex64", TypeError),
])
def test_placeholder_refuses_what_it_cannot_represent(shape, dtype, error):
    with pytest.raises(error):
        te.placeholder(shape, dtype, name="A")


@pytest.mark.parametrize("value, dtype", [(300, "int8"), (-1, "uint8"), (2**31, "int32"), (2.5, "int32")])
def test_integer_constants_must_fit_their_dtype(value, dtype):
    with pytest.raises((ValueError, TypeError)):
        te.const(value, dtype)


# ---------------------------------------------------------------- 14: a killed build leaves nothing behind
@pytest.mark.needs_cc
def test_a_killed_builder_leaves_a_temporary_folder_that_the_next_build_removes(dirs, tmp_path):
    script = textwrap.dedent("""
        import os, signal, tilegraph as tg
        from tilegraph.build import compile as c
        real = c.run_compiler
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        c.run_compiler = die
        tg.build(tg.workloads.from_spec("matmul:5,7,3"))
    """)
    proc = subprocess.run([sys.executable, "-c", script], env=os.environ.copy(), capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    root = dirs / "cache" / "build"
    assert [p.name for p in root.iterdir() if p.name.startswith(".tmp-")], "the kill left its temporary folder"
    from tilegraph.build import cache

    cache._swept.discard(str(root))
    tg.build(tg.workloads.from_spec("matmul:3,5,7"))
    assert not [p.name for p in root.iterdir() if p.name.startswith(".tmp-")]


# ---------------------------------------------------------------- 15: no GPU says so
def test_cuda_without_a_gpu_says_there_is_no_gpu(capsys, dirs, monkeypatch):
    from tilegraph import target

    monkeypatch.setattr(target, "_query_nvidia_smi", lambda: None)
    monkeypatch.setattr(target.shutil, "which", lambda name: f"/usr/bin/{name}")  # nvcc "present"
    err = refused(capsys, ["tune", "matmul:8,8,8", "--target", "cuda", "--trials", "2"], "no NVIDIA GPU")
    assert "correctness" not in err
    with pytest.raises(ResourceError, match="no NVIDIA GPU"):
        tg.tune("matmul:8,8,8", target="cuda", trials=1, progress=False, db=str(dirs / "t.db"))


# ---------------------------------------------------------------- 16: error lines stay short
@pytest.mark.parametrize("argv", [
    ["tune", "matmul:" + ",".join(["8"] * 30000)],
    ["tune", "X" * 100_000],
    ["bench", "matmul:8,8,8", "--vs", "p" * 100_000],
])
def test_error_lines_do_not_echo_huge_inputs(capsys, dirs, argv):
    err = refused(capsys, argv)
    assert len(err) < 400


# ---------------------------------------------------------------- 3: norms and softmax on hard rows
def _hard_rows(n: int, rng) -> np.ndarray:
    return np.stack([np.full(n, 1e4), np.full(n, 1.0), np.full(n, 2.5), np.full(n, -3e5),
                     1e4 + rng.standard_normal(n), 2.5 + 1e-3 * rng.standard_normal(n),
                     rng.standard_normal(n), 1e-4 * rng.standard_normal(n)]).astype(np.float32)


@pytest.mark.needs_cc
@pytest.mark.parametrize("n", [768, 37])
def test_layer_norm_on_constant_offset_and_tiny_variance_rows(n, rng):
    from tilegraph import ops

    x_t = te.placeholder((8, n), "float32", name="X")
    g_t, b_t = te.placeholder((n,), "float32", name="G"), te.placeholder((n,), "float32", name="B")
    wl = tg.Workload(inputs=[x_t, g_t, b_t], outputs=[ops.layer_norm(x_t, g_t, b_t)])
    x = _hard_rows(n, rng)
    g, b = np.ones(n, np.float32), np.zeros(n, np.float32)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    for got in (tg.interpret(tg.Schedule(wl), x, g, b), tg.build(wl)(x, g, b)):
        assert np.all(got[:4] == 0), "constant rows normalise to exactly 0"
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)


@pytest.mark.needs_cc
@pytest.mark.parametrize("n", [1000, 37])
def test_softmax_on_constant_offset_and_tiny_variance_rows(n, rng):
    from tilegraph import ops

    x_t = te.placeholder((8, n), "float32", name="X")
    wl = tg.Workload(inputs=[x_t], outputs=[ops.softmax(x_t)])
    x = _hard_rows(n, rng)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    for got in (tg.interpret(tg.Schedule(wl), x), tg.build(wl)(x)):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
