"""The reference models, from the `transformers` definitions with random weights (nothing is downloaded).

    module, inputs = zoo.torch_model("resnet50")              # eval mode, fixed seed
    module, inputs = zoo.torch_model("bert", small=True)      # reduced depth and width, for tests
    path = zoo.export_onnx("gpt2", "gpt2.onnx", exporter="legacy")   # or "dynamo" (the default)

resnet50 and mobilenet_v2 take pixel_values (1, 3, 224, 224); bert (BertModel, last hidden state)
and gpt2 (GPT2LMHeadModel, logits) take input_ids (1, 128). Small configs keep every layer kind
(bottlenecks, inverted residuals, attention with its masks) at a fraction of the size.
Needs torch and transformers (`pip install 'tilegraph[models]'`).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

MODELS = ("resnet50", "mobilenet_v2", "bert", "gpt2")
SEQUENCE = 128
BATCH_MAX = 8  # a dynamic batch's upper bound in export_onnx
SEQUENCE_MAX = 512  # the positions bert and gpt2 have embeddings for
IMAGE = 224


def _torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise ImportError("the reference models need torch and transformers: pip install 'tilegraph[models]'") from None
    return torch


def _wrapped(model: Any, output: str) -> Any:
    """A module taking input_ids only and returning one tensor (what exporters and users call)."""
    torch = _torch()

    class TokensToTensor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any) -> Any:
            # an explicit all-ones mask: transformers' packed-sequence detection (aten::diff) is
            # then skipped, which the legacy exporter cannot export
            mask = torch.ones_like(input_ids)
            out = self.model(input_ids=input_ids, attention_mask=mask, use_cache=False, return_dict=True)
            return getattr(out, output)

    return TokensToTensor().eval()


def torch_model(name: str, small: bool = False, seed: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """(module in eval mode, example inputs) of a reference model."""
    torch = _torch()
    import transformers as hf

    torch.manual_seed(seed)
    image = 64 if small else IMAGE
    sequence = 16 if small else SEQUENCE
    if name == "resnet50":
        config = hf.ResNetConfig(num_labels=1000) if not small else hf.ResNetConfig(
            num_labels=10, depths=[1, 1, 1, 1], hidden_sizes=[32, 64, 128, 256], embedding_size=16)
        module = hf.ResNetForImageClassification(config).eval()
        return _logits_module(module), (torch.randn(1, 3, image, image),)
    if name == "mobilenet_v2":
        config = hf.MobileNetV2Config(image_size=image, depth_multiplier=0.35 if small else 1.0,
                                      num_labels=10 if small else 1000)
        module = hf.MobileNetV2ForImageClassification(config).eval()
        return _logits_module(module), (torch.randn(1, 3, image, image),)
    tokens = torch.randint(0, 1000, (1, sequence))
    if name == "bert":
        config = hf.BertConfig() if not small else hf.BertConfig(num_hidden_layers=2, hidden_size=64,
                                                                  num_attention_heads=4, intermediate_size=128)
        return _wrapped(hf.BertModel(config).eval(), "last_hidden_state"), (tokens,)
    if name == "gpt2":
        config = hf.GPT2Config() if not small else hf.GPT2Config(n_layer=2, n_embd=64, n_head=4)
        return _wrapped(hf.GPT2LMHeadModel(config).eval(), "logits"), (tokens,)
    raise ValueError(f"unknown model {name!r}; the reference models are {', '.join(MODELS)}")


def _logits_module(model: Any) -> Any:
    torch = _torch()

    class PixelsToLogits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: Any) -> Any:
            return self.model(pixel_values=pixel_values, return_dict=True).logits

    return PixelsToLogits().eval()


def input_names(name: str) -> tuple[str, ...]:
    return ("pixel_values",) if name in ("resnet50", "mobilenet_v2") else ("input_ids",)


def export_onnx(name: str, path: str | os.PathLike, small: bool = False, exporter: str = "dynamo",
                opset: int = 18, dynamic: bool = False, dynamic_batch: bool = False) -> Path:
    """Write the model as ONNX with torch.onnx (`exporter` "dynamo", the default exporter, or
    "legacy", the TorchScript one) and return the path. `dynamic`: the sequence length of bert and
    gpt2 exported as the symbolic extent `seq` (dim_param; at most 512, what their positions hold).
    `dynamic_batch`: the batch axis as `batch` (at most BATCH_MAX), for any of the four models."""
    torch = _torch()
    if exporter not in ("dynamo", "legacy"):
        raise ValueError(f"exporter must be 'dynamo' or 'legacy', got {exporter!r}")
    module, inputs = torch_model(name, small)
    if dynamic and name not in ("bert", "gpt2"):
        raise ValueError(f"dynamic=True exports the sequence length of bert and gpt2, not of {name}")
    path = Path(path)
    first = input_names(name)[0]
    names = {**({0: "batch"} if dynamic_batch else {}), **({1: "seq"} if dynamic else {})}
    if dynamic_batch:
        inputs = tuple(torch.cat([x, x]) for x in inputs)  # the exporter specializes a batch of 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            ranges = {"batch": (1, BATCH_MAX), "seq": (2, SEQUENCE_MAX)}
            shapes = {first: {axis: torch.export.Dim(n, min=ranges[n][0], max=ranges[n][1])
                              for axis, n in names.items()}} if names else None
            program = torch.onnx.export(module, inputs, dynamo=True, input_names=list(input_names(name)),
                                        output_names=["logits" if name != "bert" else "last_hidden_state"],
                                        verbose=False, dynamic_shapes=shapes)
            program.save(str(path))
        else:
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=opset,
                              input_names=list(input_names(name)),
                              output_names=["logits" if name != "bert" else "last_hidden_state"],
                              dynamic_axes={first: names} if names else None)
    return path


DECODER_INPUTS = ("input_ids", "past_keys", "past_values")  # a decode step's; prefill takes input_ids only
DECODER_OUTPUTS = ("logits", "present_keys", "present_values")
POSITIONS_MAX = 1024  # the positions gpt2 has embeddings for: prompt and generated tokens together


def decoder_model(name: str = "gpt2", small: bool = False, seed: int = 0, past: bool = True) -> Any:
    """A decoder step with its KV cache as tensors, what `export_decoder` exports: with `past`,
    (input_ids [1, seq], past_keys and past_values [layers, 1, heads, past, head size]) ->
    (logits [1, seq, vocab], present_keys, present_values [layers, 1, heads, past + seq, head
    size]), positions past .. past + seq; without, prefill: input_ids -> the same outputs."""
    torch = _torch()
    import transformers as hf
    from transformers.cache_utils import DynamicCache

    if name != "gpt2":
        raise ValueError(f"the decoder with a KV cache is exported for gpt2, not {name!r}")
    torch.manual_seed(seed)
    # the small config's weights are drawn 10x wider than GPT-2's initializer: at 0.02 a random
    # two-layer model repeats one token, and a test comparing greedy tokens could not fail
    config = hf.GPT2Config() if not small else hf.GPT2Config(n_layer=2, n_embd=64, n_head=4, initializer_range=0.2)
    model = hf.GPT2LMHeadModel(config).eval()
    layers = config.n_layer

    def step(input_ids: Any, past_keys: Any = None, past_values: Any = None) -> Any:
        cache = DynamicCache()
        before = 0
        if past_keys is not None:
            for i in range(layers):
                cache.update(past_keys[i], past_values[i], i)
            before = past_keys.shape[3]
        total = before + input_ids.shape[1]
        mask = torch.ones(1, total, dtype=torch.int64)
        positions = torch.arange(before, total).unsqueeze(0)
        out = model(input_ids=input_ids, past_key_values=cache, attention_mask=mask, position_ids=positions,
                    use_cache=True, return_dict=True)
        kept = out.past_key_values
        keys = torch.stack([kept.layers[i].keys for i in range(layers)])
        values = torch.stack([kept.layers[i].values for i in range(layers)])
        return out.logits, keys, values

    class Prefill(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any) -> Any:
            return step(input_ids)

    class Decode(Prefill):
        def forward(self, input_ids: Any, past_keys: Any, past_values: Any) -> Any:  # type: ignore[override]
            return step(input_ids, past_keys, past_values)

    module = (Decode() if past else Prefill()).eval()
    module.config = config
    return module


def export_decoder(name: str, folder: str | os.PathLike, small: bool = False,
                   exporter: str = "dynamo") -> tuple[Path, Path]:
    """Write `name`'s decoder with a KV cache as two ONNX files, (folder/prefill.onnx,
    folder/decode.onnx), the pair optimum writes as decoder_model / decoder_with_past_model:
    prefill takes the prompt (dim_param `seq`), decode one step's tokens and the cache so far
    (dim_params `seq` and `past`). Both hold the same weights (the same seed)."""
    torch = _torch()
    if exporter not in ("dynamo", "legacy"):
        raise ValueError(f"exporter must be 'dynamo' or 'legacy', got {exporter!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    prefill, decode = decoder_model(name, small, past=False), decoder_model(name, small, past=True)
    config = decode.config
    heads, size = config.n_head, config.n_embd // config.n_head
    tokens = torch.randint(0, 1000, (1, 3))
    # two distinct tensors: given one tensor twice, torch.export reads both inputs from the first
    keys, values = torch.randn(config.n_layer, 1, heads, 5, size), torch.randn(config.n_layer, 1, heads, 5, size)
    paths = folder / "prefill.onnx", folder / "decode.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module, path, inputs in ((prefill, paths[0], (tokens,)), (decode, paths[1], (tokens, keys, values))):
            names = list(DECODER_INPUTS[:len(inputs)])
            if exporter == "dynamo":
                seq = torch.export.Dim("seq", min=1, max=POSITIONS_MAX - 1)
                shapes: dict[str, Any] = {"input_ids": {1: seq}}
                if len(inputs) > 1:
                    past = torch.export.Dim("past", min=1, max=POSITIONS_MAX - 1)
                    shapes.update(past_keys={3: past}, past_values={3: past})
                program = torch.onnx.export(module, inputs, dynamo=True, input_names=names,
                                            output_names=list(DECODER_OUTPUTS), verbose=False, dynamic_shapes=shapes)
                program.save(str(path))
            else:
                axes: dict[str, Any] = {"input_ids": {1: "seq"}}
                if len(inputs) > 1:
                    axes.update(past_keys={3: "past"}, past_values={3: "past"})
                torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=18, input_names=names,
                                  output_names=list(DECODER_OUTPUTS), dynamic_axes=axes)
    return paths


__all__ = ["MODELS", "torch_model", "export_onnx", "input_names", "decoder_model", "export_decoder",
           "DECODER_INPUTS", "DECODER_OUTPUTS", "POSITIONS_MAX"]
