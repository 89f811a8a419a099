"""Every ATen op the PyTorch frontend converts, against eager PyTorch, on float, integer, bool and
mixed operands (tensors, 0-d tensors, Python numbers, buffers): the same dtype and the same values,
or a refusal (GraphError / UnsupportedOpError), never a silent difference (issue 35, part 4).

The ops of one operand combination are compiled together as one module (one compile); a module
that is refused is split in halves until the refused ops are alone, so a refusal of one op does not
hide the others' results."""

import warnings

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError, UnsupportedOpError

pytestmark = [pytest.mark.needs_cc, pytest.mark.extended]  # long: in CI's extended run, not the default one
torch = pytest.importorskip("torch")

BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"), "floordiv": lambda a, b: a // b,
    "pow": lambda a, b: torch.pow(a, b), "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "where": lambda a, b: torch.where(a > 0, a, b),
}
UNARY = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
    "erf": torch.erf, "sqrt": torch.sqrt, "abs": torch.abs, "neg": torch.neg, "reciprocal": torch.reciprocal,
    "floor": torch.floor, "ceil": torch.ceil, "rsqrt": torch.rsqrt, "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu, "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish, "clamp": lambda a: torch.clamp(a, -1, 2),
    "logical_not": torch.logical_not, "cast_float": lambda a: a.float(), "cast_int": lambda a: a.to(torch.int64),
}
GEN = np.random.default_rng(35)


def _values(kind):
    if kind == "float32":
        return torch.from_numpy(GEN.uniform(0.25, 4.0, (2, 5)).astype(np.float32) * GEN.choice([-1, 1], (2, 5)))
    if kind == "pos_float32":
        return torch.from_numpy(GEN.uniform(0.25, 4.0, (2, 5)).astype(np.float32))
    if kind in ("int64", "int32"):
        values = GEN.integers(-9, 10, (2, 5))
        values[values == 0] = 3  # no division by zero (torch raises on integer x // 0)
        return torch.from_numpy(values.astype(kind))
    if kind == "bool":
        return torch.from_numpy(GEN.random((2, 5)) < 0.5)
    raise ValueError(kind)


class Ops(torch.nn.Module):
    """fn(a, b) for each op; `b` may be a run-time tensor, a buffer, a 0-d tensor or a number."""

    def __init__(self, fns, b_kind, b_value):
        super().__init__()
        self.fns, self.b_kind = fns, b_kind
        if b_kind == "buffer":
            self.register_buffer("buf", b_value)
        self.b_value = b_value

    def forward(self, a, *rest):
        b = rest[0] if self.b_kind == "tensor" else self.buf if self.b_kind == "buffer" else self.b_value
        return tuple(fn(a, b) if b is not None else fn(a) for fn in self.fns.values())


def _eager(fns, a, b):
    """The ops eager PyTorch runs on these operands, with their results."""
    ok = {}
    for name, fn in fns.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn(a, b) if b is not None else fn(a)
        except (RuntimeError, TypeError):
            continue  # eager refuses too (e.g. sqrt of an integer tensor in some versions): nothing to match
        ok[name] = out
    return ok


def _compare(fns, a, b, b_kind):
    expected = _eager(fns, a, b)
    fns = {k: v for k, v in fns.items() if k in expected}
    inputs = (a, b) if b_kind == "tensor" else (a,)
    arrays = [x.numpy() for x in inputs]
    results = {}

    def compiled(names):  # a refused group is split in halves: one refusal costs a few compiles, not one per op
        try:
            with torch.no_grad():
                model = tg.compile(Ops({n: fns[n] for n in names}, b_kind, b), example_inputs=inputs)
            results.update(zip(names, model(*arrays)))
        except (GraphError, UnsupportedOpError):
            if len(names) > 1:  # a refusal is allowed; a wrong answer is not
                compiled(names[: len(names) // 2])
                compiled(names[len(names) // 2:])

    compiled(list(fns))
    checked = 0
    for name, value in results.items():
        want = expected[name].numpy()
        assert value.dtype == want.dtype, f"{name}: dtype {value.dtype}, eager {want.dtype}"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(value, want, rtol=2e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(value, want, err_msg=name)
        checked += 1
    return checked, len(expected)


@pytest.mark.parametrize("a_kind, b_kind, b", [
    ("float32", "tensor", "float32"), ("int64", "tensor", "int64"), ("int32", "tensor", "int32"),
    ("int64", "tensor", "float32"), ("float32", "tensor", "int64"), ("int64", "number", 4),
    ("int64", "number", 2.5), ("float32", "number", 3), ("int64", "buffer", "int64"),
    ("float32", "zero_dim", "int64"), ("bool", "tensor", "bool"),
])
def test_binary_ops_match_eager(a_kind, b_kind, b):
    a = _values(a_kind)
    if b_kind in ("tensor", "buffer"):
        b_value = _values(b)
    elif b_kind == "zero_dim":
        b_value, b_kind = torch.tensor(3, dtype=getattr(torch, b)), "number"
    else:
        b_value = b
    checked, total = _compare(BINARY, a, b_value, b_kind)
    assert checked >= total // 2, f"only {checked} of {total} ops were converted"


@pytest.mark.parametrize("kind", ["pos_float32", "float32", "int64", "bool"])
def test_unary_ops_match_eager(kind):
    checked, total = _compare(UNARY, _values(kind), None, "none")
    assert checked >= total // 3, f"only {checked} of {total} ops were converted"


def test_an_integer_buffer_divided_by_an_int_is_true_division():
    """The probe's DeBERTa case: pos / 4 on an int64 buffer gave integer division."""

    class Positions(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", torch.arange(6))

        def forward(self, x):
            return x + self.pos / 4, x * torch.cos(self.pos.float())  # cos of a buffer: torch computes it

    x = torch.zeros(6)
    module = Positions()
    with torch.no_grad():
        got = tg.compile(module, example_inputs=(x,))(x.numpy())
        for g, want in zip(got, module(x)):
            np.testing.assert_allclose(g, want.numpy(), rtol=1e-6, atol=1e-7)
