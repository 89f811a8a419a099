"""The architectures of the model-coverage study: `transformers` definitions with reduced configs and
random weights (nothing is downloaded), and small hand-written models of what transformers lacks.

    module, inputs = build("whisper_encoder")     # eval mode, fixed seed; inputs a tuple of tensors

Each takes positional tensors and returns one tensor, so both ONNX exporters and torch.compile see
the same function. Every layer kind of the full model is kept (attention variants, convolutions,
normalizations, position schemes); only depth, width and lengths shrink.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _torch() -> Any:
    import torch

    return torch


def _first_output(model: Any, keyword: str, attribute: str, mask: bool = False) -> Any:
    torch = _torch()

    class FirstOutput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            extra = {"attention_mask": torch.ones_like(x)} if mask else {}
            return getattr(self.model(**{keyword: x}, **extra, return_dict=True), attribute)

    return FirstOutput().eval()


def _tokens(length: int = 16) -> Any:
    return _torch().randint(0, 1000, (1, length))


def albert() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.AlbertConfig(vocab_size=1000, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=128)
    return _first_output(hf.AlbertModel(config), "input_ids", "last_hidden_state", mask=True), (_tokens(),)


def llama() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return _first_output(hf.LlamaModel(config), "input_ids", "last_hidden_state", mask=True), (_tokens(),)


def roberta() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.RobertaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=128, max_position_embeddings=64)
    return _first_output(hf.RobertaModel(config), "input_ids", "last_hidden_state", mask=True), (_tokens(),)


def deberta_v2() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.DebertaV2Config(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, relative_attention=True, position_buckets=16,
                                max_relative_positions=32, pos_att_type=["p2c", "c2p"], max_position_embeddings=64)
    return _first_output(hf.DebertaV2Model(config), "input_ids", "last_hidden_state", mask=True), (_tokens(),)


def t5_encoder() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    return _first_output(hf.T5EncoderModel(config), "input_ids", "last_hidden_state"), (_tokens(),)


def mamba() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.MambaConfig(vocab_size=1000, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                            use_cache=False)
    return _first_output(hf.MambaModel(config), "input_ids", "last_hidden_state"), (_tokens(),)


def swin() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)
    return _first_output(hf.SwinModel(config), "pixel_values", "last_hidden_state"), (_torch().randn(1, 3, 32, 32),)


def segformer() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                                decoder_hidden_size=32, num_labels=4)
    module = hf.SegformerForSemanticSegmentation(config)
    return _first_output(module, "pixel_values", "logits"), (_torch().randn(1, 3, 64, 64),)


def wav2vec2() -> tuple[Any, tuple]:
    import transformers as hf

    config = hf.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                               num_conv_pos_embedding_groups=4, feat_extract_norm="group", do_stable_layer_norm=False)
    return _first_output(hf.Wav2Vec2Model(config), "input_values", "last_hidden_state"), (_torch().randn(1, 1600),)


def whisper_encoder() -> tuple[Any, tuple]:
    import transformers as hf
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = hf.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                              num_mel_bins=16, max_source_positions=32)
    encoder = WhisperEncoder(config)
    return _first_output(encoder, "input_features", "last_hidden_state"), (_torch().randn(1, 16, 64),)


def yolo_style() -> tuple[Any, tuple]:
    """A YOLO-style detector: strided conv-BN-SiLU stages, a top-down path with nearest upsampling
    and concatenation, 1x1 detection heads at two scales."""
    torch = _torch()
    nn = torch.nn

    def block(cin: int, cout: int, stride: int) -> Any:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class Detector(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.s2, self.s3 = block(3, 16, 2), block(16, 32, 2), block(32, 64, 2)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = block(64 + 32, 32, 1)
            self.head_small, self.head_large = nn.Conv2d(32, 3 * 9, 1), nn.Conv2d(64, 3 * 9, 1)

        def forward(self, x: Any) -> Any:
            c2 = self.s2(self.stem(x))
            c3 = self.s3(c2)
            p2 = self.fuse(torch.cat([self.up(c3), c2], dim=1))
            return torch.cat([self.head_small(p2).flatten(2), self.head_large(c3).flatten(2)], dim=2)

    return Detector().eval(), (torch.randn(1, 3, 64, 64),)


def unet_block() -> tuple[Any, tuple]:
    """A diffusion UNet up block: sinusoidal timestep embedding (sin/cos) through an MLP, a ResNet
    block with GroupNorm and SiLU, bilinear upsampling, a convolution."""
    torch = _torch()
    nn = torch.nn

    class UpBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.time = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 32))
            self.norm1, self.conv1 = nn.GroupNorm(8, 32), nn.Conv2d(32, 32, 3, padding=1)
            self.norm2, self.conv2 = nn.GroupNorm(8, 32), nn.Conv2d(32, 32, 3, padding=1)
            self.out = nn.Conv2d(32, 16, 3, padding=1)

        def forward(self, x: Any, t: Any) -> Any:
            freqs = torch.exp(-torch.arange(16, dtype=torch.float32) * (9.21 / 16))
            angles = t[:, None] * freqs[None, :]
            embedding = self.time(torch.cat([torch.sin(angles), torch.cos(angles)], dim=1))
            h = self.conv1(nn.functional.silu(self.norm1(x))) + embedding[:, :, None, None]
            h = x + self.conv2(nn.functional.silu(self.norm2(h)))
            h = nn.functional.interpolate(h, scale_factor=2.0, mode="bilinear", align_corners=False)
            return self.out(h)

    return UpBlock().eval(), (torch.randn(1, 32, 8, 8), torch.tensor([37.0]))


def recurrent() -> tuple[Any, tuple]:
    """An LSTM then a GRU over a sequence (batch first), the last hidden states."""
    torch = _torch()
    nn = torch.nn

    class Recurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 24, batch_first=True)
            self.gru = nn.GRU(24, 12, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.gru(self.lstm(x)[0])[0]

    return Recurrent().eval(), (torch.randn(1, 8, 16),)


ARCHITECTURES: dict[str, Callable[[], tuple[Any, tuple]]] = {
    "albert": albert, "llama": llama, "swin": swin, "t5_encoder": t5_encoder, "segformer": segformer,
    "yolo_style": yolo_style, "wav2vec2": wav2vec2, "unet_block": unet_block, "whisper_encoder": whisper_encoder,
    "roberta": roberta, "deberta_v2": deberta_v2, "mamba": mamba, "recurrent": recurrent,
}


def build(name: str, seed: int = 0) -> tuple[Any, tuple]:
    """(module in eval mode, example inputs) of an architecture, weights drawn from `seed`."""
    torch = _torch()
    torch.manual_seed(seed)
    module, inputs = ARCHITECTURES[name]()
    return module.eval(), inputs
