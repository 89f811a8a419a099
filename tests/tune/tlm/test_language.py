"""The tensor language: every op family's programs round-trip, and bad sentences are refused."""

import random
import zlib

import pytest

from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.tune.space.program import recognise, sample
from tilegraph.tune.space.sketch import sketches_for, space_for
from tilegraph.tune.tlm.language import (
    NUM_MAX,
    VOCAB,
    LanguageError,
    decision_mask,
    number_tokens,
    parse,
    render,
    render_trace,
    split_sentence,
)
from tilegraph.workloads import spec_examples

AVX2 = Target.from_string("cpu -isa=avx2 -cores=2")
OPENCL = Target("opencl")


@pytest.mark.parametrize("op", sorted(spec_examples()))
def test_every_op_family_round_trips(op):
    wl = workloads.from_spec(spec_examples()[op])
    rng = random.Random(zlib.crc32(op.encode()))  # a seed per op, the same in every run
    for sketch in sketches_for(wl):
        for _ in range(3):
            program = sample(wl, sketch, rng)
            tokens = render(wl, AVX2, program)
            assert VOCAB.decode(VOCAB.encode(tokens)) == tokens
            again = parse(tokens, wl)
            assert again.trace_json == program.trace_json
            assert render(wl, AVX2, again) == tokens
            # a recorded trace has the same sentence
            assert render_trace(wl, AVX2, program.trace_json) == tokens


@pytest.mark.parametrize("spec", ["matmul:33,20,17", "conv2d_nhwc:1,9,9,8,16,3,1,1", "softmax:6,70", "relu:5,7"])
def test_gpu_sketch_programs_round_trip(spec):
    wl = workloads.from_spec(spec)
    rng = random.Random(zlib.crc32(spec.encode()))
    sketches = space_for(wl, OPENCL)
    assert set(sketches) <= {"gpu_rows", "gpu_multi_level_tiling", "gpu_flat"}
    for sketch in sketches:
        for _ in range(3):
            try:
                program = sample(wl, sketch, rng)
            except Exception:  # a draw the sketch refuses (too many threads): the language is not asked
                continue
            tokens = render(wl, OPENCL, program)
            assert tokens[1] == "isa:opencl" and f"sketch:{sketch}" in tokens
            assert parse(tokens, wl).trace_json == program.trace_json
            assert render_trace(wl, OPENCL, program.trace_json) == tokens


def test_the_vocabulary_only_grows_at_its_end():
    # version 1's 4,207 tokens (the digest the first shipped model was trained on) stay a prefix,
    # so a model of an earlier version keeps every token's id and loads grown (weights.py)
    assert VOCAB.prefix_digest(4207) == "52aa2211bc4021da"
    assert VOCAB.tokens[4207:] == ("sketch:gpu_flat", "sketch:gpu_multi_level_tiling", "sketch:gpu_rows")


def test_suite_workloads_round_trip_through_recorded_traces():
    for wid in ("GMM-1", "C2D-2", "DEP-3", "SFM-1", "TBG-1", "C3D-3", "CAP-2", "NRM-1"):
        wl = workloads.get(wid, reduced=True)
        program = sample(wl, sketches_for(wl)[0], random.Random(3))
        assert parse(render(wl, AVX2, program), wl).trace_json == recognise(wl, program.trace_json).trace_json


def test_header_names_isa_op_shapes_and_loops():
    wl = workloads.from_spec("matmul:196,512,64")
    tokens = render(wl, AVX2, sample(wl, "multi_level_tiling", random.Random(0)))
    text = " ".join(tokens)
    assert text.startswith("<bos> isa:avx2 op:matmul in dtype:float32 #2 #196 #512")
    assert "loops S #196 S #64 R #512 sketch:multi_level_tiling T #4 #196" in text
    assert tokens[-1] == "<eos>"
    isa, sketch, _, decisions = split_sentence(tokens)
    assert (isa, sketch) == ("isa:avx2", "multi_level_tiling") and len(decisions) >= 3


def test_big_numbers_use_digits():
    assert number_tokens(NUM_MAX) == [f"#{NUM_MAX}"]
    assert number_tokens(50257) == ["#big", "d5", "d0", "d2", "d5", "d7", "#end"]
    wl = workloads.from_spec("dense:1,64,50257")
    program = sample(wl, sketches_for(wl)[0], random.Random(0))
    assert parse(render(wl, AVX2, program), wl).trace_json == program.trace_json


def test_decision_mask_marks_only_values():
    wl = workloads.from_spec("softmax:64,100")
    tokens = render(wl, AVX2, sample(wl, "plain", random.Random(0)))
    mask = decision_mask(tokens)
    free = decision_mask(tokens, free_only=True)
    assert all(not m for t, m in zip(tokens, mask) if not t.startswith("#"))
    assert sum(free) < sum(mask)  # each tile's innermost factor is not free
    assert all(m for f, m in zip(free, mask) if f)


def test_bad_sentences_are_refused_with_a_reason():
    wl = workloads.from_spec("matmul:32,32,32")
    tokens = render(wl, AVX2, sample(wl, "multi_level_tiling", random.Random(0)))
    other = workloads.from_spec("matmul:32,32,64")
    with pytest.raises(LanguageError, match="another workload"):
        parse(tokens, other)
    with pytest.raises(LanguageError, match="<eos>"):
        parse(tokens[:-1], wl)
    t = tokens.index("T")
    broken = list(tokens)
    broken[t + 3] = "#3"  # a factor that no longer multiplies to the extent
    with pytest.raises(LanguageError, match="multiply"):
        parse(broken, wl)
    with pytest.raises(LanguageError, match="vocabulary"):
        VOCAB.encode(["no-such-token"])
    with pytest.raises(LanguageError, match="sketch"):
        parse(["<bos>", "isa:avx2", "<eos>"], wl)


def test_foreign_traces_have_no_sentence():
    from tilegraph.schedule import Schedule

    wl = workloads.from_spec("matmul:32,32,32")
    assert render_trace(wl, AVX2, Schedule(wl).trace.to_json()) is None


# Graph ops added after the vocabulary's first version: they are named op:other (tokens for them
# would be appended, as version 2 appended the GPU sketches). Elementwise ops: never a task's anchor.
ADDED_AFTER_THE_VOCABULARY = {"floor", "ceil", "round", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                              "asinh", "acosh", "atanh", "mod", "fmod", "reduce_min", "reduce_prod", "bitand", "bitor", "bitxor",
                              "shl", "shr", "bitcast",
                              "attention",  # an anchor (the optional fuse_attention rewrite): op:other until version 3
                              "winograd_input", "winograd_output",  # anchors never tuned (OpDef.tuned False)
                              "offset_by_dims",  # never tuned either (values that follow run-time dims)
                              "reshape_copy"}  # a reshape over run-time extents: op:other, a layout copy


def test_every_graph_op_has_a_token():
    from tilegraph.graph.ops.registry import OPS

    assert all(f"op:{name}" in VOCAB.tokens for name in OPS if name not in ADDED_AFTER_THE_VOCABULARY)
    assert not any(f"op:{name}" in VOCAB.tokens for name in ADDED_AFTER_THE_VOCABULARY)
