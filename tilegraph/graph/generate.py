"""Text generation with a KV cache: the prompt through a prefill model, then one decode step per token.

    decoder = compile_decoder("prefill.onnx", "decode.onnx", max_length=96, time_budget=60)
    run = decoder.generate(prompt_ids, new_tokens=64)     # greedy
    run.tokens, run.prefill_tokens_per_s, run.decode_tokens_per_s

The two files are the pair optimum writes (decoder_model / decoder_with_past_model) and
`zoo.export_decoder` exports: prefill takes input_ids [1, seq] and gives logits [1, seq, vocab]
with the cache it made (present_keys, present_values [layers, 1, heads, seq, head size]); decode
takes one step's input_ids and the cache so far (past_keys, past_values, dim `past`) and gives the
cache one token longer. Each is compiled once for its whole range of lengths (graph/dims.py): the
prompt's `seq` in 1 .. max_length - 1, the cache's `past` in 1 .. max_length - 1, so no length of
a generation compiles anything. Positions past .. past + seq and the causal mask over past + seq
are computed in the compiled model from the dims (frontends/onnx_dims.py).

Greedy decoding picks each next token as the first index of the largest logit of the last
position (numpy's argmax), the same rule for every system `greedy` drives (an ONNX Runtime
session, a torch module), so their tokens compare one to one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.errors import GraphError

INPUTS = ("input_ids", "past_keys", "past_values")
OUTPUTS = ("logits", "present_keys", "present_values")

Step = Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]]  # feeds -> (logits, keys, values)


@dataclass(frozen=True)
class Generation:
    """A greedy generation: the new tokens and where the time went."""

    prompt_length: int
    tokens: tuple[int, ...]
    prefill_s: float  # the prompt's step (it also gives the first new token)
    decode_s: tuple[float, ...]  # each later token's step
    logits: tuple[np.ndarray, ...] = ()  # with keep_logits: the last position's logits of each step

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_length / self.prefill_s

    @property
    def decode_tokens_per_s(self) -> float:
        return len(self.decode_s) / sum(self.decode_s) if self.decode_s else float("nan")


def greedy(prefill: Step, decode: Step, prompt: np.ndarray, new_tokens: int,
           keep_logits: bool = False) -> Generation:
    """`new_tokens` tokens after `prompt` (token ids, [seq] or [1, seq]), each the argmax of the
    last position's logits: prefill once, then decode one token at a time on the cache."""
    ids = np.asarray(prompt, dtype=np.int64).reshape(1, -1)
    if new_tokens < 1:
        raise GraphError(f"new_tokens must be at least 1, got {new_tokens}")
    start = time.perf_counter()
    logits, keys, values = prefill({"input_ids": ids})[:3]
    prefill_s = time.perf_counter() - start
    tokens = [int(np.argmax(logits[0, -1]))]
    kept = [np.array(logits[0, -1])] if keep_logits else []
    steps = []
    for _ in range(new_tokens - 1):
        start = time.perf_counter()
        logits, keys, values = decode({"input_ids": np.array([[tokens[-1]]], np.int64), "past_keys": keys,
                                       "past_values": values})[:3]
        steps.append(time.perf_counter() - start)
        tokens.append(int(np.argmax(logits[0, -1])))
        if keep_logits:
            kept.append(np.array(logits[0, -1]))
    return Generation(ids.shape[1], tuple(tokens), prefill_s, tuple(steps), tuple(kept))


def model_step(model: Any) -> Step:
    """A compiled model (or anything with run(feeds) -> {name: array}) as a step."""
    def step(feeds: dict[str, np.ndarray]) -> Sequence[np.ndarray]:
        out = model.run(feeds)
        return [out[name] for name in OUTPUTS]

    return step


def onnxruntime_step(session: Any) -> Step:
    """An onnxruntime.InferenceSession of a prefill or decode file as a step."""
    names = [i.name for i in session.get_inputs()]
    return lambda feeds: session.run(list(OUTPUTS), {k: v for k, v in feeds.items() if k in names})


@dataclass
class Decoder:
    """A prefill and a decode model compiled for every length up to `max_length` tokens in all."""

    prefill: Any
    decode: Any
    max_length: int

    def generate(self, prompt: np.ndarray, new_tokens: int, keep_logits: bool = False) -> Generation:
        length = int(np.asarray(prompt).size)
        if length < 1 or length + new_tokens > self.max_length:
            raise GraphError(f"a prompt of {length} tokens and {new_tokens} new ones exceed the {self.max_length} "
                             "tokens the decoder was compiled for (max_length)")
        return greedy(model_step(self.prefill), model_step(self.decode), prompt, new_tokens, keep_logits)


def compile_decoder(prefill: str | os.PathLike, decode: str | os.PathLike, max_length: int,
                    time_budget: float = 0.0, db: Any = None, decode_share: float = 0.5,
                    prompt_lengths: Sequence[int] | None = None, **options: Any) -> Decoder:
    """The decoder pair compiled once each for prompts and caches up to `max_length` tokens in all
    (at least 2: one prompt token and one new one); `time_budget` seconds of tuning split between
    them (`decode_share` to the decode model). The decode model is tuned with its weights timed
    from memory (`evict_weights`): a step reads every weight once, more than a cache holds, so
    its products are matrix-vector products bound by memory, and timed hot they rank schedules by
    a cache they never see. `prompt_lengths` (the prompts expected, a length repeated as often as
    it is expected) weighs the tuning of each model's buckets by the lengths it will run: the
    prompts' for the prefill, the caches' from each prompt to `max_length` for the decode steps
    (compile_model's `expected`); every length still runs. Other options: graph.compile.compile_model."""
    from tilegraph.graph.compile import compile_model

    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2:
        raise GraphError(f"max_length must be an integer >= 2 (prompt and new tokens together), got {max_length!r}")
    if not 0 <= decode_share <= 1:
        raise GraphError(f"decode_share must be within [0, 1], got {decode_share!r}")
    expected_prompts, expected_caches = None, None
    if prompt_lengths is not None:
        prompts = [prompt_lengths] if isinstance(prompt_lengths, int) else list(prompt_lengths)
        if not prompts or not all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p < max_length
                                  for p in prompts):
            raise GraphError(f"prompt_lengths must be integers in [1, {max_length - 1}] (max_length {max_length} "
                             f"leaves room for one new token), got {prompt_lengths!r}")
        expected_prompts = {"seq": prompts}
        expected_caches = {"past": [past for p in prompts for past in range(p, max_length)]}
    first = compile_model(prefill, db=db, time_budget=time_budget * (1 - decode_share),
                          dims={"seq": (1, max_length - 1)}, expected=expected_prompts, **options)
    steps = compile_model(decode, db=db, time_budget=time_budget * decode_share,
                          dims={"past": (1, max_length - 1)}, input_shapes={"input_ids": (1, 1)},
                          expected=expected_caches, **{"evict_weights": True, **options})
    for model, what, expected in ((first, "prefill", INPUTS[:1]), (steps, "decode", INPUTS)):
        if tuple(model.graph.inputs) != expected or not set(OUTPUTS) <= set(model.graph.outputs):
            raise GraphError(f"{what} model takes {', '.join(model.graph.inputs)} and gives "
                             f"{', '.join(model.graph.outputs)}; a {what} step takes {', '.join(expected)} and "
                             f"gives {', '.join(OUTPUTS)} (zoo.export_decoder writes such files)")
    return Decoder(first, steps, max_length)


__all__ = ["Generation", "Decoder", "greedy", "compile_decoder", "model_step", "onnxruntime_step", "INPUTS",
           "OUTPUTS"]
