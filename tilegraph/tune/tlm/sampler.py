"""Writing programs with the language model: each decision sampled token by token, illegal values masked.

    sampler = Sampler(net, workload, target, seed=0)
    program, logprob = sampler.sample(sketch, temperature=1.0)   # or greedy=True
    program.sentence                                              # the tokens written (language.py)

The sketch runs as usual (tune/space/sketch.py); where it needs a decision it asks ModelDecider,
which feeds the decision's structural tokens (T, levels, extent / C, candidate count) to the model
and samples the values from its next-token distribution restricted to what the design space allows
there: for tile level i the divisors of what the levels before left (the innermost then follows;
the level before it may leave at most max_innermost), for a categorical decision the candidate
indices. So every sampled program is legal by construction, and its sentence is exactly
`render(workload, target, program)`. The header's key/value cache is computed once per sketch
and shared by every sample.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.schedule.primitives.common import get_loop
from tilegraph.schedule.sampling import divisors
from tilegraph.schedule.schedule import IntRV, Schedule
from tilegraph.te.workload import Workload
from tilegraph.tune.space.decider import Decider
from tilegraph.tune.space.program import Program, checked_program
from tilegraph.tune.space.sketch import apply_sketch
from tilegraph.tune.tlm.language import BIG, EOS, NUM_MAX, VOCAB, categorical_prefix, header, number_tokens, tile_prefix
from tilegraph.tune.tlm.network import ScheduleLM, torch


@dataclass(frozen=True)
class Written:
    program: Program
    sentence: tuple[str, ...]
    logprob: float  # of the sampled values under the model (masked distributions)


def _value_ids(values: list[int]) -> tuple[list[int], bool]:
    small = [VOCAB.id(f"#{v}") for v in values if v <= NUM_MAX]
    return small, any(v > NUM_MAX for v in values)


class ModelDecider(Decider):
    """A Decider whose every decision the language model writes (it takes no given ones)."""

    def __init__(self, net: ScheduleLM, cache: list[dict[str, Any]], generator: Any, rng: random.Random,
                 temperature: float = 1.0, greedy: bool = False):
        super().__init__(rng)
        self.net = net
        self.cache = cache
        self.generator = generator
        self.temperature = temperature
        self.greedy = greedy
        self.pending: list[str] = []
        self.written: list[str] = []
        self.logprob = 0.0

    def _feed(self, tokens: list[str]) -> None:
        self.pending += tokens
        self.written += tokens

    def _choose(self, values: list[int]) -> int:
        """One of `values` (legal ones), sampled from the model; its tokens are fed."""
        if len(values) == 1:
            self._feed(number_tokens(values[0]))
            return values[0]
        if self.cache[0]["pos"] + len(self.pending) + 8 > self.net.cfg.context:  # no room left: uniform
            value = self.rng.choice(values)
            self._feed(number_tokens(value))
            return value
        logits = self.net.step(self.cache, VOCAB.encode(self.pending))
        self.pending = []
        ids, has_big = _value_ids(values)
        if has_big:
            ids.append(VOCAB.id(BIG))
        chosen = logits[ids]
        logp = torch.log_softmax(chosen.float(), dim=0)
        if self.greedy:
            k = int(torch.argmax(logp))
        else:
            probs = torch.softmax(chosen.float() / max(self.temperature, 1e-3), dim=0)
            k = int(torch.multinomial(probs, 1, generator=self.generator))
        self.logprob += float(logp[k])
        if has_big and k == len(ids) - 1:
            value = self.rng.choice([v for v in values if v > NUM_MAX])
        else:
            value = int(VOCAB.tokens[ids[k]][1:])
        self._feed(number_tokens(value))
        return value

    def tile(self, sch: Schedule, loop: str, n: int, max_innermost: int | None = None) -> tuple[IntRV, ...]:
        extent = get_loop(sch.func, str(loop)).extent
        self._feed(tile_prefix(n, extent))
        factors: list[int] = []
        remaining = extent
        for level in range(n - 1):
            allowed = divisors(remaining)
            if level == n - 2 and max_innermost is not None:
                allowed = [d for d in allowed if remaining // d <= max_innermost]
            factor = self._choose(allowed)
            factors.append(factor)
            remaining //= factor
        factors.append(remaining)
        self._feed(number_tokens(remaining))
        rvs = sch.sample_tile(loop, n, max_innermost, decision=factors)
        self.taken.append(factors)
        return rvs

    def categorical(self, sch: Schedule, candidates: Any, probs: Any = None) -> int:
        self._feed(categorical_prefix(len(candidates)))
        index = self._choose(list(range(len(candidates))))
        rv = sch.sample_categorical(candidates, probs, decision=index)
        self.taken.append(index)
        return int(rv)


class Sampler:
    """Programs of one workload written by the model; deterministic under its seed."""

    def __init__(self, net: ScheduleLM, workload: Workload, target: Any, seed: int = 0):
        self.net = net.eval()
        self.workload = workload
        self.target = target
        self.generator = torch.Generator().manual_seed(seed)
        self.rng = random.Random(seed)
        self._headers: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}

    def _header_cache(self, sketch: str) -> tuple[list[str], list[dict[str, Any]]]:
        if sketch not in self._headers:
            tokens = header(self.workload, self.target, sketch)
            cache = self.net.start()
            with torch.no_grad():
                self.net.step(cache, VOCAB.encode(tokens[:-1]))  # the sketch token is the first fed with a decision
            self._headers[sketch] = (tokens, cache)
        return self._headers[sketch]

    def sample(self, sketch: str, temperature: float = 1.0, greedy: bool = False) -> Written:
        """One program of `sketch`; raises ScheduleError when the postprocessor refuses it."""
        tokens, cache = self._header_cache(sketch)
        own_cache = [dict(c) for c in cache]  # tensors are never mutated in place: sharing the header's is safe
        decider = ModelDecider(self.net, own_cache, self.generator, self.rng, temperature, greedy)
        decider.pending = [tokens[-1]]
        with torch.no_grad():
            sch = apply_sketch(self.workload, sketch, decider)
        program = checked_program(sch, sketch, decider.taken)
        sentence = (*tokens, *decider.written, EOS)
        return Written(program, sentence, decider.logprob)

    def refresh(self) -> None:
        """Forget the header caches (after the weights changed)."""
        self._headers.clear()

    def sample_many(self, sketches: list[str], count: int, temperature: float = 1.0, attempts: int = 4,
                    deadline: float | None = None) -> list[Written]:
        """Up to `count` distinct programs, sketches taken in turn (each sketch's first one greedy); stops
        at `deadline` (time.monotonic()) once it has one."""
        out: dict[str, Written] = {}
        tries = 0
        while len(out) < count and tries < attempts * count:
            if deadline is not None and out and time.monotonic() > deadline:
                break
            sketch = sketches[tries % len(sketches)]
            greedy = tries < len(sketches)  # each sketch's most likely program first
            tries += 1
            try:
                w = self.sample(sketch, temperature, greedy=greedy)
            except ScheduleError:
                continue
            out.setdefault(w.program.trace_json, w)
        return list(out.values())


__all__ = ["ModelDecider", "Sampler", "Written"]
