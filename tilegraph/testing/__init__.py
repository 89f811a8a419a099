"""Helpers for checking kernels: numpy float64 references and random inputs."""

from tilegraph.testing.data import random_inputs
from tilegraph.testing.reference import REFERENCES, reference_outputs

__all__ = ["REFERENCES", "reference_outputs", "random_inputs"]
