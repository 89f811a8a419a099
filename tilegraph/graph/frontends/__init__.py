"""Frontends: models in other formats as tilegraph graphs (ONNX, PyTorch through torch.export)."""
