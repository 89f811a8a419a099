"""The fused attention operator against float64 numpy: on the interpreter and in C (its row-block
schedule, every rows choice), at odd sizes, with masks that leave rows fully masked."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.schedule.attention import ATTENTION_ROWS, attention_schedule, is_attention


def _reference(q, kt, v, mask, scale, divide, nan_to_zero):
    x = q.astype(np.float64) @ kt.astype(np.float64)
    if scale is not None:
        x = x / scale if divide else x * scale
    if mask is not None:
        x = x + mask
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    return p @ v.astype(np.float64)


def _case(batch, s, t, d, e, mask_shape, seed, masked_row=True):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*batch, s, d)).astype(np.float32)
    kt = rng.standard_normal((*batch, d, t)).astype(np.float32)
    v = rng.standard_normal((*batch, t, e)).astype(np.float32)
    mask = None
    if mask_shape is not None:
        mask = np.where(rng.random(mask_shape) < 0.3, -np.inf, 0.0).astype(np.float32)
        if masked_row:
            mask[..., s // 2, :] = -np.inf  # a row with every key masked
    return q, kt, v, mask


def _workload(arrays, scale, divide, nan_to_zero):
    q, kt, v, mask = arrays
    tq = te.placeholder(q.shape, "float32", name="q")
    tk = te.placeholder(kt.shape, "float32", name="kt")
    tv = te.placeholder(v.shape, "float32", name="v")
    tm = te.placeholder(mask.shape, "float32", name="mask") if mask is not None else None
    out = ops.attention(tq, tk, tv, tm, scale=scale, divide=divide, nan_to_zero=nan_to_zero)
    inputs = [tq, tk, tv] + ([tm] if tm is not None else [])
    return tg.Workload(inputs, [out]), [a for a in arrays if a is not None]


CASES = [  # batch, S, T, D, E, mask shape, scale, divide, nan_to_zero
    ((1, 3), 7, 5, 6, 9, (1, 1, 7, 5), 0.125, False, True),
    ((2,), 33, 17, 8, 16, (2, 33, 17), 3.0, True, False),
    ((1, 2), 16, 32, 16, 32, (16, 32), None, False, True),
    ((3,), 1, 1, 1, 1, None, 0.5, False, False),
]


@pytest.mark.parametrize("batch,s,t,d,e,mask_shape,scale,divide,nan_to_zero", CASES)
def test_attention_interpreter_matches_float64(batch, s, t, d, e, mask_shape, scale, divide, nan_to_zero):
    arrays = _case(batch, s, t, d, e, mask_shape, seed=s + t)
    wl, args = _workload(arrays, scale, divide, nan_to_zero)
    want = _reference(*arrays, scale, divide, nan_to_zero)
    got = tg.interpret(tg.Schedule(wl), *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # a fully masked row: NaN, or 0 with nan_to_zero


@pytest.mark.needs_cc
@pytest.mark.parametrize("batch,s,t,d,e,mask_shape,scale,divide,nan_to_zero", CASES)
def test_attention_in_c_every_rows_choice(batch, s, t, d, e, mask_shape, scale, divide, nan_to_zero):
    """Every rows choice: the schedules for AVX2 and AVX-512 (vectors of 8 and 16) replay and
    interpret correctly on any machine; the host's own target's are built and run in C."""
    arrays = _case(batch, s, t, d, e, mask_shape, seed=s * t + 1)
    wl, args = _workload(arrays, scale, divide, nan_to_zero)
    assert is_attention(wl)
    want = _reference(*arrays, scale, divide, nan_to_zero)
    for target in (tg.Target("cpu", isa="avx2"), tg.Target("cpu", isa="avx512"), None):
        host = target is None
        target = target or tg.Target("cpu")
        for rows in ATTENTION_ROWS:
            sch = attention_schedule(wl, target, rows=rows)
            assert sch is not None, f"rows={rows}"
            if not host:
                replayed = tg.Schedule.replay(wl, sch.trace.to_json())  # the schedule is data: it replays
                np.testing.assert_allclose(tg.interpret(replayed, *args), want, rtol=1e-5, atol=1e-5)
                continue
            out = np.full(wl.outputs[0].shape, 7.0e30, np.float32)  # poisoned: every element must be written
            tg.build(sch, target)(*args, out=out)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=f"{target.isa} rows={rows}")
            np.testing.assert_array_equal(np.isnan(out), np.isnan(want))


def test_attention_default_schedule_is_the_row_block_nest():
    arrays = _case((1, 2), 8, 8, 4, 4, (1, 1, 8, 8), seed=0)
    wl, _ = _workload(arrays, 0.5, False, True)
    from tilegraph.schedule.defaults import default_schedule

    sch = default_schedule(wl, tg.Target("cpu", isa="avx2"))
    assert [i["kind"] for i in sch.trace.to_dict()["instructions"]].count("compute_at") == 5


@pytest.mark.parametrize("shapes,match", [
    (((2, 4, 3), (2, 5, 4), (2, 4, 6)), "q's depth"),
    (((2, 4, 3), (2, 3, 4), (2, 5, 6)), "key count"),
    (((2, 4, 3), (1, 3, 4), (2, 4, 6)), "leading"),
])
def test_attention_refuses_shapes_that_do_not_chain(shapes, match):
    q, kt, v = (te.placeholder(s, "float32", name=n) for s, n in zip(shapes, ("q", "kt", "v")))
    with pytest.raises(ValueError, match=match):
        ops.attention(q, kt, v)
    with pytest.raises(ValueError, match="broadcast"):
        ops.attention(te.placeholder((2, 4, 3), "float32", name="q"), te.placeholder((2, 3, 5), "float32", name="k"),
                      te.placeholder((2, 5, 6), "float32", name="v"), te.placeholder((3, 5), "float32", name="m"))


def test_attention_reference_is_registered(check):
    """The tuner checks every candidate against reference_outputs: the operator has one."""
    q = te.placeholder((2, 5, 3), "float32", name="q")
    kt = te.placeholder((2, 3, 7), "float32", name="kt")
    v = te.placeholder((2, 7, 4), "float32", name="v")
    mask = te.placeholder((5, 7), "float32", name="mask")
    check([q, kt, v, mask], ops.attention(q, kt, v, mask, scale=0.3))


def test_gensor_proposes_the_row_block_schedules_of_an_attention_workload():
    """Gensor's walks do not model the seven stages: its candidates for an attention workload are
    the row-block schedule at each rows choice (the default first), each replaying."""
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.gensor import GensorStrategy

    arrays = _case((1, 2), 9, 8, 4, 4, (1, 1, 9, 8), seed=1)
    wl, args = _workload(arrays, 0.5, False, True)
    target = tg.Target("cpu", isa="avx2")
    cands = GensorStrategy(top_k=2).propose(TuneContext(wl, target, 0, None, trials_left=8), 8)
    rows = [c.meta["attention_rows"] for c in cands]
    assert rows[0] == 8 and sorted(set(rows)) == sorted(ATTENTION_ROWS)
    want = _reference(*arrays, 0.5, False, True)
    for c in cands:
        np.testing.assert_allclose(tg.interpret(tg.Schedule.replay(wl, c.trace_json), *args), want,
                                   rtol=1e-5, atol=1e-5)
