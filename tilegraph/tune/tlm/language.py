"""The tensor language: a sketch program as a short token sequence, and back.

    tokens = render(workload, target, program)        # program: a sketch's (tune/space/program.py)
    program = parse(tokens, workload)                  # the same trace, re-derived from the decisions
    ids = VOCAB.encode(tokens); VOCAB.decode(ids)

A sentence is a header that says what is being scheduled, the sketch, then the decisions in the
order the sketch asks for them (the order of the trace's sampling instructions):

    <bos> isa:avx512 op:batch_matmul                                       target ISA and op family
      in dtype:float32 #3 #1 #128 #128  in ...  out dtype:float32 #3 #1 #128 #128   dtypes, ranks, shapes
      loops S #1 S #128 S #128 R #128                                       the anchor's loop nest
      sketch:multi_level_tiling
      T #4 #128 #2 #8 #1 #8      a tile decision: levels, the loop's extent, then the factors
      C #3 #1                    a categorical decision: how many candidates, then the index taken
      ... <eos>

Numbers up to NUM_MAX are one token each (`#n`); larger ones are `#big`, their decimal digits
(`d0`..`d9`) and `#end`. Only the factors and indices are the model's to write (`decision_mask`):
the header and the structural tokens (T/C, level and candidate counts, extents) follow from the
design space and are fed, never sampled. Parsing re-runs the sketch with the decisions (the Decider
replays them) and refuses a sentence whose header does not describe the workload or whose
decisions do not fit it, so a parsed program is always a legal one of this workload.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tilegraph.errors import ScheduleError, TilegraphError
from tilegraph.target import CPU_ISAS
from tilegraph.te.workload import Workload
from tilegraph.tune.gensor.state import IterSpace
from tilegraph.tune.space.program import Program, recognise, sample

NUM_MAX = 4096
LANGUAGE_VERSION = 2

BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"
TILE, CATEGORICAL = "T", "C"
BIG, BIG_END = "#big", "#end"
OTHER_OP = "op:other"

# The vocabulary is frozen at the shipped model's (its digest is checked on load): op families and
# dtypes added since map to op:other and the nearest dtype token (`dtype_token`).
_TE_OPS_V1 = ("add", "avg_pool2d", "batch_matmul", "batch_norm", "conv1d_nlc", "conv2d_bn_relu", "conv2d_capsule_nhwijc",
              "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nhwc", "conv3d_ndhwc", "dense", "depthwise_conv2d_nhwc",
              "div", "exp", "gelu", "global_avg_pool2d", "layer_norm", "matmul", "max", "max_pool2d", "maximum", "mean",
              "min", "minimum", "mul", "norm_bmn", "relu", "sigmoid", "softmax", "sub", "sum", "tanh", "transpose",
              "transpose_batch_matmul")
_DTYPES_V1 = ("bfloat16", "bool", "float16", "float32", "float64", "int32", "int64", "int8", "uint8")
# dtypes added after the vocabulary, written as the token of a type of the same width and kind
_DTYPE_STAND_INS = {"int16": "bfloat16", "uint16": "bfloat16", "uint32": "int32", "uint64": "int64"}
# the graph level's op names (graph/ops/registry.py) as of the vocabulary, which name a model task's anchor
_GRAPH_OPS = ("abs", "add", "and", "avg_pool2d", "batch_norm", "cast", "clip", "concat", "conv2d", "div", "equal", "erf",
              "exp", "expand", "gather", "gather_elements", "gelu", "global_avg_pool", "greater", "greater_equal",
              "hard_sigmoid", "hard_swish", "identity", "isnan", "layer_norm", "less", "less_equal", "log", "matmul",
              "max", "max_pool2d", "min", "mul", "neg", "not", "or", "pad", "pow", "reciprocal", "reduce_max",
              "reduce_mean", "reduce_sum", "relu", "reshape", "sigmoid", "slice", "softmax", "sqrt", "sub", "tanh",
              "transpose", "where")


class LanguageError(TilegraphError, ValueError):
    """A sentence that does not parse, or does not describe the workload it is parsed against."""


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._index  # type: ignore[attr-defined]

    def id(self, token: str) -> int:
        try:
            return self._index[token]  # type: ignore[attr-defined]
        except KeyError:
            raise LanguageError(f"token {token!r} is not in the tensor language's vocabulary") from None

    def encode(self, tokens: Iterable[str]) -> list[int]:
        return [self.id(t) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    @property
    def digest(self) -> str:
        """A hash of the token list: a model trained on another vocabulary must not load."""
        return self.prefix_digest(len(self.tokens))

    def prefix_digest(self, size: int) -> str:
        """The digest of the vocabulary's first `size` tokens (an earlier version of it, if it had that size)."""
        return hashlib.sha256("\n".join(self.tokens[:size]).encode()).hexdigest()[:16]


def number_token(n: int) -> str:
    return f"#{n}"


# The sketches the language has words for, by the version that added them: v1 the CPU design space,
# v2 the GPU sketches (tune/space/gpu_sketch.py; the ISA tokens isa:cuda / isa:opencl were in v1).
_SKETCHES_V1 = ("multi_level_tiling", "plain")
_SKETCHES_V2 = ("gpu_flat", "gpu_multi_level_tiling", "gpu_rows")
LANGUAGE_SKETCHES = (*_SKETCHES_V1, *_SKETCHES_V2)
# The vocabulary only grows at its end: version n's tokens are a prefix of version n+1's, so a model
# trained on an earlier vocabulary keeps every token id and loads with the new rows grown
# (weights.py). Removing or reordering a token is a new vocabulary and a retrained model.
_ADDED_V2 = tuple(f"sketch:{s}" for s in _SKETCHES_V2)


def _build_vocabulary() -> Vocabulary:
    specials = [PAD, BOS, EOS, TILE, CATEGORICAL, "in", "out", "loops", "S", "R", BIG, BIG_END]
    isas = [f"isa:{i}" for i in (*CPU_ISAS, "cuda", "opencl", "other")]
    ops = [f"op:{o}" for o in sorted({*_TE_OPS_V1, *_GRAPH_OPS})] + [OTHER_OP]
    dtypes = [f"dtype:{d}" for d in _DTYPES_V1]
    sketches = [f"sketch:{s}" for s in sorted(_SKETCHES_V1)]
    digits = [f"d{i}" for i in range(10)]
    numbers = [number_token(n) for n in range(NUM_MAX + 1)]
    return Vocabulary(tuple(specials + isas + ops + dtypes + sketches + digits + numbers + list(_ADDED_V2)))


VOCAB = _build_vocabulary()


def number_tokens(n: int) -> list[str]:
    if not isinstance(n, int) or n < 0:
        raise LanguageError(f"the tensor language writes non-negative integers only, got {n!r}")
    if n <= NUM_MAX:
        return [number_token(n)]
    return [BIG, *(f"d{c}" for c in str(n)), BIG_END]


def token_value(token: str) -> int | None:
    """The integer a one-token number stands for; None for other tokens."""
    if token.startswith("#") and token[1:].isdigit():
        return int(token[1:])
    return None


def isa_token(target: Any) -> str:
    kind = getattr(target, "kind", "cpu")
    isa = getattr(target, "isa", None) if kind == "cpu" else kind
    token = f"isa:{isa}"
    return token if token in VOCAB else "isa:other"


def op_token(workload: Workload) -> str:
    token = f"op:{workload.op_name}"
    return token if token in VOCAB else OTHER_OP


def dtype_token(dtype: str) -> str:
    """The token of a dtype; dtypes newer than the vocabulary take a stand-in of their width."""
    token = f"dtype:{_DTYPE_STAND_INS.get(dtype, dtype)}"
    if token not in VOCAB:
        raise LanguageError(f"the tensor language has no token for dtype {dtype}")
    return token


def workload_tokens(workload: Workload) -> list[str]:
    """The header after the ISA: op family, every input's and output's dtype and shape, the anchor's loops."""
    out = [op_token(workload)]
    for role, tensors in (("in", workload.inputs), ("out", workload.outputs)):
        for t in tensors:
            out += [role, dtype_token(str(t.dtype)), *number_tokens(len(t.shape))]
            for d in t.shape:
                out += number_tokens(int(d))
    space = IterSpace.from_workload(workload)
    out.append("loops")
    for n, extent in enumerate(space.extents):
        out += ["S" if n < space.num_spatial else "R", *number_tokens(int(extent))]
    return out


def header(workload: Workload, target: Any, sketch: str) -> list[str]:
    if sketch not in LANGUAGE_SKETCHES:
        raise LanguageError(f"unknown sketch {sketch!r}; known: {sorted(LANGUAGE_SKETCHES)}")
    return [BOS, isa_token(target), *workload_tokens(workload), f"sketch:{sketch}"]


def tile_prefix(n: int, extent: int) -> list[str]:
    """The fed tokens before a tile decision's factors."""
    return [TILE, *number_tokens(n), *number_tokens(extent)]


def categorical_prefix(count: int) -> list[str]:
    return [CATEGORICAL, *number_tokens(count)]


def decision_tokens(decisions: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for d in decisions:
        if isinstance(d, list):
            extent = 1
            for f in d:
                extent *= int(f)
            out += tile_prefix(len(d), extent)
            for f in d:
                out += number_tokens(int(f))
        elif isinstance(d, int) and not isinstance(d, bool):
            raise LanguageError("a categorical decision needs its candidate count: render from a Program")
        else:
            raise LanguageError(f"not a decision: {d!r}")
    return out


def _sampling_counts(program: Program) -> list[int | None]:
    """Per decision of the program: the candidate count of a categorical one, None for a tile."""
    from tilegraph.schedule.trace import Trace

    sampling = [i for i in Trace.from_json(program.trace_json).instructions if i.decision is not None]
    return [len(i.inputs["candidates"]) if i.kind == "sample_categorical" else None for i in sampling]


def render(workload: Workload, target: Any, program: Program) -> list[str]:
    """The sentence of a sketch program (a foreign trace has no sentence: LanguageError)."""
    if program.sketch is None:
        raise LanguageError("a foreign trace (not a sketch's program) has no sentence in the tensor language")
    counts = _sampling_counts(program)
    if len(counts) != len(program.decisions):
        raise LanguageError("the program's decisions do not match its trace's sampling instructions")
    body: list[str] = []
    for d, count in zip(program.decisions, counts):
        if count is None:
            body += decision_tokens([list(d)])
        else:
            body += [*categorical_prefix(count), *number_tokens(int(d))]
    return [*header(workload, target, program.sketch), *body, EOS]


def render_trace(workload: Workload, target: Any, trace_json: str) -> list[str] | None:
    """The sentence of a recorded trace; None when it is not a sketch's program (Gensor's picks)."""
    program = recognise(workload, trace_json, target)
    if program is None or program.sketch is None:
        return None
    return render(workload, target, program)


def _read_number(tokens: Sequence[str], pos: int) -> tuple[int, int]:
    if pos >= len(tokens):
        raise LanguageError("the sentence ends inside a decision")
    value = token_value(tokens[pos])
    if value is not None:
        return value, pos + 1
    if tokens[pos] != BIG:
        raise LanguageError(f"expected a number at position {pos}, found {tokens[pos]!r}")
    digits = []
    pos += 1
    while pos < len(tokens) and tokens[pos] != BIG_END:
        if not (tokens[pos].startswith("d") and tokens[pos][1:].isdigit()):
            raise LanguageError(f"expected a digit at position {pos}, found {tokens[pos]!r}")
        digits.append(tokens[pos][1:])
        pos += 1
    if pos >= len(tokens) or not digits:
        raise LanguageError("an unterminated #big number")
    return int("".join(digits)), pos + 1


def split_sentence(tokens: Sequence[str]) -> tuple[str, str, list[str], list[Any]]:
    """(isa token, sketch, workload tokens, decisions) of a sentence, without checking it against a workload."""
    tokens = list(tokens)
    if len(tokens) < 3 or tokens[0] != BOS:
        raise LanguageError("a sentence starts with <bos> and the target ISA")
    sketch_at = next((i for i, t in enumerate(tokens) if t.startswith("sketch:")), None)
    if sketch_at is None:
        raise LanguageError("the sentence names no sketch")
    isa, body = tokens[1], tokens[2:sketch_at]
    sketch = tokens[sketch_at].split(":", 1)[1]
    decisions: list[Any] = []
    pos = sketch_at + 1
    while pos < len(tokens) and tokens[pos] != EOS:
        kind = tokens[pos]
        if kind == TILE:
            n, pos = _read_number(tokens, pos + 1)
            extent, pos = _read_number(tokens, pos)
            factors = []
            for _ in range(n):
                f, pos = _read_number(tokens, pos)
                factors.append(f)
            product = 1
            for f in factors:
                product *= f
            if product != extent:
                raise LanguageError(f"tile factors {factors} do not multiply to the extent {extent}")
            decisions.append(factors)
        elif kind == CATEGORICAL:
            count, pos = _read_number(tokens, pos + 1)
            index, pos = _read_number(tokens, pos)
            if not 0 <= index < count:
                raise LanguageError(f"categorical index {index} outside its {count} candidates")
            decisions.append(index)
        else:
            raise LanguageError(f"expected a decision (T or C) at position {pos}, found {kind!r}")
    if pos >= len(tokens):
        raise LanguageError("the sentence has no <eos>")
    return isa, sketch, body, decisions


def parse(tokens: Sequence[str], workload: Workload) -> Program:
    """The program a sentence writes for `workload`; LanguageError when it is not one of its programs."""
    _, sketch, body, decisions = split_sentence(tokens)
    if sketch not in LANGUAGE_SKETCHES:
        raise LanguageError(f"unknown sketch {sketch!r}; known: {sorted(LANGUAGE_SKETCHES)}")
    if body != workload_tokens(workload):
        raise LanguageError(f"the sentence describes another workload than {workload.op_name} {workload.shapes}")
    try:
        program = sample(workload, sketch, random.Random(0), decisions)
    except ScheduleError as err:
        raise LanguageError(f"the decisions do not give a legal program: {err}") from None
    if list(program.decisions) != [list(d) if isinstance(d, list) else d for d in decisions]:
        raise LanguageError("the decisions do not fit this workload's sketch (another count or order)")
    return program


def decision_spans(tokens: Sequence[str]) -> list[tuple[int, int, bool]]:
    """(start, end, free) of every decision value's tokens; free is False for a tile's innermost factor,
    which the others and the extent determine (the sampler feeds it rather than sampling it)."""
    spans: list[tuple[int, int, bool]] = []
    sketch_at = next((i for i, t in enumerate(tokens) if t.startswith("sketch:")), len(tokens))
    pos = sketch_at + 1
    while pos < len(tokens) and tokens[pos] in (TILE, CATEGORICAL):
        if tokens[pos] == TILE:
            n, pos = _read_number(tokens, pos + 1)
            _, pos = _read_number(tokens, pos)
            for level in range(n):
                start = pos
                _, pos = _read_number(tokens, pos)
                spans.append((start, pos, level < n - 1))
        else:
            _, pos = _read_number(tokens, pos + 1)
            start = pos
            _, pos = _read_number(tokens, pos)
            spans.append((start, pos, True))
    return spans


def decision_mask(tokens: Sequence[str], free_only: bool = False) -> list[bool]:
    """Per token: whether it is a decision value (a factor or an index), the tokens a model writes;
    free_only leaves out the tiles' innermost factors."""
    mask = [False] * len(tokens)
    for start, end, free in decision_spans(tokens):
        if free or not free_only:
            for i in range(start, end):
                mask[i] = True
    return mask


__all__ = ["BOS", "EOS", "LANGUAGE_VERSION", "NUM_MAX", "VOCAB", "LanguageError", "Vocabulary", "categorical_prefix",
           "decision_mask", "decision_spans", "header", "number_tokens", "parse", "render", "render_trace",
           "split_sentence", "tile_prefix", "token_value", "workload_tokens"]
