"""The vendor library's time for a task's operator (PyTorch's oneDNN/MKL kernels on CPU), so the
per-task table shows where tilegraph loses (user_needs N6). Compiled models never call it.

    seconds, note = vendor_time("torch", workload, threads=2)    # (None, "why") when unavailable
"""

from __future__ import annotations

from typing import Any

from tilegraph.runtime.timer import measure
from tilegraph.testing.data import random_inputs
from tilegraph.testing.peers import PeerUnavailable, peer_function


def vendor_time(vendor: str, workload: Any, threads: int) -> tuple[float | None, str]:
    """Median seconds of `vendor`'s equivalent of `workload` at `threads` threads, or (None, why)."""
    try:
        fn = peer_function(vendor, workload, random_inputs(workload, seed=0))
    except PeerUnavailable as e:
        return None, str(e)
    if vendor == "torch":
        import torch

        torch.set_num_threads(threads)
    try:
        timing = measure(fn)  # the one timing loop (runtime/timer.py): what our kernels are timed with
    except Exception as e:  # the vendor rejects this shape: say so, never fail the report
        return None, f"{vendor} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return timing.median, ""


__all__ = ["vendor_time"]
