"""Lowering: scheduled loop IR -> flat, vectorised, printable loop IR (see pipeline.py)."""
