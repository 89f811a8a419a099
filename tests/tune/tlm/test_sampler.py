"""The sampler writes legal programs whose sentences are the language's, deterministically under a seed."""

import pytest

from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.tune.space.sketch import sketches_for

torch = pytest.importorskip("torch")

from tilegraph.tune.tlm.language import VOCAB, decision_mask, parse, render  # noqa: E402
from tilegraph.tune.tlm.sampler import Sampler  # noqa: E402
from tilegraph.tune.tlm.weights import load_model  # noqa: E402

AVX2 = Target.from_string("cpu -isa=avx2 -cores=2")


@pytest.mark.parametrize("spec", ["matmul:24,40,36", "conv2d_nhwc:1,9,9,6,10,3,1,1", "softmax:7,100",
                                  "depthwise_conv2d_nhwc:1,11,11,5,3,2,1", "dense:1,16,5000"])
def test_samples_are_legal_and_speak_the_language(tiny_model_dir, spec):
    net, _ = load_model(tiny_model_dir)
    wl = workloads.from_spec(spec)
    written = Sampler(net, wl, AVX2, seed=1).sample_many(sketches_for(wl), 12)
    assert len(written) >= 2
    for w in written:
        assert list(w.sentence) == render(wl, AVX2, w.program)
        assert parse(list(w.sentence), wl).trace_json == w.program.trace_json
        assert w.logprob <= 0.0


def test_sampling_is_deterministic_under_a_seed(tiny_model_dir):
    net, _ = load_model(tiny_model_dir)
    wl = workloads.from_spec("matmul:48,64,40")
    a = [w.program.trace_json for w in Sampler(net, wl, AVX2, seed=7).sample_many(sketches_for(wl), 10)]
    b = [w.program.trace_json for w in Sampler(net, wl, AVX2, seed=7).sample_many(sketches_for(wl), 10)]
    c = [w.program.trace_json for w in Sampler(net, wl, AVX2, seed=8).sample_many(sketches_for(wl), 10)]
    assert a == b and a != c


def test_the_cache_matches_the_full_forward(tiny_model_dir):
    net, _ = load_model(tiny_model_dir)
    wl = workloads.from_spec("matmul:48,64,40")
    w = Sampler(net, wl, AVX2, seed=0).sample(sketches_for(wl)[0])
    ids = VOCAB.encode(list(w.sentence))
    with torch.no_grad():
        full = net(torch.tensor([ids]))[0]
        cache = net.start()
        first = net.step(cache, ids[:9])
        second = net.step(cache, ids[9:20])
    assert torch.allclose(full[8], first, atol=1e-4) and torch.allclose(full[19], second, atol=1e-4)


def test_the_model_decides_among_legal_values(tiny_model_dir):
    """A model whose output always prefers #1 writes 1 for every free decision (a factor of 1 or
    the second candidate), sampled or greedy; the mask still keeps every program legal."""
    net, _ = load_model(tiny_model_dir)
    with torch.no_grad():
        net.ln.weight.zero_()
        net.ln.bias.fill_(1.0)
        net.embed.weight[VOCAB.id("#1")] = 5.0  # logit(#1) = 160, every other ~N(0, 0.1)
    wl = workloads.from_spec("matmul:32,32,32")
    sampler = Sampler(net, wl, AVX2, seed=0)
    for greedy in (True, False):
        w = sampler.sample("multi_level_tiling", greedy=greedy)
        free = [t for t, f in zip(w.sentence, decision_mask(list(w.sentence), free_only=True)) if f]
        assert free and set(free) == {"#1"}
        assert parse(list(w.sentence), wl).trace_json == w.program.trace_json
