"""The decoder-only transformer that writes schedule decisions (needs torch: `pip install 'tilegraph[tlm]'`).

    net = ScheduleLM(ModelConfig())                      # ~2 M parameters
    logits = net(ids)                                    # (batch, length, vocab), causal
    cache = net.start(prefix_ids); logits = net.step(cache, [id, ...])   # incremental, for sampling

A GPT-style stack (pre-LayerNorm blocks, causal self-attention, GELU MLP, tied input/output
embeddings) over the tensor language (language.py). A number token's embedding adds a projection
of features of its value (log2, parity, divisibility by 2..8 and by 3, 5, 7) to its learnt
embedding, so a number the corpus never showed still lands near its neighbours. Sampling keeps a
key/value cache per layer: each generated token costs one position, not the whole sentence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tilegraph.tune.tlm.language import VOCAB, token_value


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError("strategy 'tlm' needs PyTorch: pip install 'tilegraph[tlm]'") from None
    return torch


torch = require_torch()
nn = torch.nn
F = torch.nn.functional


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = len(VOCAB)
    width: int = 192
    layers: int = 4
    heads: int = 6
    context: int = 192
    dropout: float = 0.1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NUMBER_FEATURES = 9


def number_features() -> Any:
    """(vocab, NUMBER_FEATURES): zeros for non-number tokens."""
    table = torch.zeros(len(VOCAB), NUMBER_FEATURES)
    for i, tok in enumerate(VOCAB.tokens):
        v = token_value(tok)
        if v is None:
            continue
        table[i] = torch.tensor([
            1.0, math.log2(v + 1) / 12.0, float(v % 2 == 0), float(v % 4 == 0), float(v % 8 == 0),
            float(v % 3 == 0), float(v % 5 == 0), float(v % 7 == 0), float(v > 0 and (v & (v - 1)) == 0)])
    return table


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width))
        self.drop = nn.Dropout(cfg.dropout)

    def _split(self, x: Any) -> Any:
        b, t, c = x.shape
        return x.view(b, t, self.heads, c // self.heads).transpose(1, 2)

    def forward(self, x: Any, cache: dict[str, Any] | None = None) -> Any:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = self._split(q), self._split(k), self._split(v)
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.drop.p if self.training else 0.0)
        else:
            past = cache.get("k")
            if past is not None:
                k = torch.cat([past, k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
            total = k.shape[2]
            # the new positions see every cached one and the new ones up to themselves
            mask = torch.ones(t, total, dtype=torch.bool).tril(diagonal=total - t)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.mlp(self.ln2(x)))


class ScheduleLM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        self.register_buffer("numbers", number_features(), persistent=False)
        self.number_proj = nn.Linear(NUMBER_FEATURES, cfg.width, bias=False)
        self.position = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(self._init)

    @staticmethod
    def _init(module: Any) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _embed(self, ids: Any, start: int) -> Any:
        t = ids.shape[1]
        if start + t > self.cfg.context:
            raise ValueError(f"sentence of {start + t} tokens exceeds the model's context of {self.cfg.context}")
        pos = torch.arange(start, start + t)
        return self.drop(self.embed(ids) + self.number_proj(self.numbers[ids]) + self.position(pos))

    def _logits(self, x: Any) -> Any:
        return self.ln(x) @ self.embed.weight.T

    def forward(self, ids: Any) -> Any:
        x = self._embed(ids, 0)
        for block in self.blocks:
            x = block(x)
        return self._logits(x)

    def start(self) -> list[dict[str, Any]]:
        """An empty key/value cache (one dict per layer)."""
        return [{"pos": 0} for _ in self.blocks]

    def step(self, cache: list[dict[str, Any]], ids: list[int]) -> Any:
        """Append `ids` to the cached sentence; the logits after the last one (vocab,)."""
        start = cache[0]["pos"]
        x = self._embed(torch.tensor([ids]), start)
        for block, c in zip(self.blocks, cache):
            x = block(x, c)
        for c in cache:
            c["pos"] = start + len(ids)
        return self._logits(x[0, -1])


__all__ = ["ModelConfig", "ScheduleLM", "require_torch"]
