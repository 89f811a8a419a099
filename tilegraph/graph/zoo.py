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
                opset: int = 18, dynamic: bool = False) -> Path:
    """Write the model as ONNX with torch.onnx (`exporter` "dynamo", the default exporter, or
    "legacy", the TorchScript one) and return the path. `dynamic`: the sequence length of bert and
    gpt2 exported as the symbolic extent `seq` (dim_param; at most 512, what their positions hold)."""
    torch = _torch()
    if exporter not in ("dynamo", "legacy"):
        raise ValueError(f"exporter must be 'dynamo' or 'legacy', got {exporter!r}")
    module, inputs = torch_model(name, small)
    if dynamic and name not in ("bert", "gpt2"):
        raise ValueError(f"dynamic=True exports the sequence length of bert and gpt2, not of {name}")
    path = Path(path)
    first = input_names(name)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            shapes = {first: {1: torch.export.Dim("seq", min=2, max=SEQUENCE_MAX)}} if dynamic else None
            program = torch.onnx.export(module, inputs, dynamo=True, input_names=list(input_names(name)),
                                        output_names=["logits" if name != "bert" else "last_hidden_state"],
                                        verbose=False, dynamic_shapes=shapes)
            program.save(str(path))
        else:
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=opset,
                              input_names=list(input_names(name)),
                              output_names=["logits" if name != "bert" else "last_hidden_state"],
                              dynamic_axes={first: {1: "seq"}} if dynamic else None)
    return path


__all__ = ["MODELS", "torch_model", "export_onnx", "input_names"]
