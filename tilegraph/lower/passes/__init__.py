"""Lowering passes, one per file; each exposes `run(func, target) -> Func`."""
