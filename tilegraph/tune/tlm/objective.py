"""The training objective, shared by offline training (tilegraph/tlm/train.py) and online fine-tuning.

    ids, mask = batch_tensors(sentences)          # padded token ids, decision-value mask
    loss = weighted_loss(net, ids, mask, weights) # cross entropy on decision values, weighted per sentence
    weights = relative_weights(latencies, power)  # (best / latency) ** power within one workload

Only the decision values (language.decision_mask) carry loss: the header and the structural
tokens follow from the design space and are fed at sampling time. A sentence's weight is its
program's speed relative to the workload's best, raised to `power`: the model learns to write the
decisions of fast programs, and a slow one teaches little (TLM keeps only the best; a power keeps
the near-best as well, which one workload's few hundred measurements need).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tilegraph.tune.tlm.language import PAD, VOCAB, decision_mask
from tilegraph.tune.tlm.network import ScheduleLM, torch


def batch_tensors(sentences: Sequence[Sequence[str]]) -> tuple[Any, Any]:
    length = max(len(s) for s in sentences)
    pad = VOCAB.id(PAD)
    ids = torch.full((len(sentences), length), pad, dtype=torch.long)
    mask = torch.zeros((len(sentences), length), dtype=torch.bool)
    for row, sentence in enumerate(sentences):
        ids[row, : len(sentence)] = torch.tensor(VOCAB.encode(sentence))
        mask[row, : len(sentence)] = torch.tensor(decision_mask(sentence))
    return ids, mask


def token_losses(net: ScheduleLM, ids: Any, mask: Any) -> tuple[Any, Any]:
    """Per-position cross entropy of predicting token t from tokens < t, and the positions that count."""
    logits = net(ids[:, :-1])
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                               reduction="none").view(ids.shape[0], -1)
    return losses, mask[:, 1:]


def weighted_loss(net: ScheduleLM, ids: Any, mask: Any, weights: Any) -> Any:
    losses, counted = token_losses(net, ids, mask)
    per_sentence = (losses * counted).sum(1) / counted.sum(1).clamp(min=1)
    return (per_sentence * weights).sum() / weights.sum().clamp(min=1e-9)


def relative_weights(latencies: Sequence[float], power: float) -> list[float]:
    """(best / latency) ** power; 0 for failures (inf or nan)."""
    finite = [x for x in latencies if math.isfinite(x) and x > 0]
    if not finite:
        return [0.0 for _ in latencies]
    best = min(finite)
    return [(best / x) ** power if math.isfinite(x) and x > 0 else 0.0 for x in latencies]


__all__ = ["batch_tensors", "relative_weights", "token_losses", "weighted_loss"]
