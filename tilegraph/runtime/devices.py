"""Whether this machine can run a target's kernels (building needs only the compiler).

    require_runnable(target)     # ResourceError naming what is missing

Tuning and timing run kernels, so they refuse a missing device before any work.
"""

from __future__ import annotations

from tilegraph.errors import ResourceError
from tilegraph.target import Target, gpu_visible


def require_runnable(target: Target) -> None:
    """Refuse a target whose kernels cannot run on this machine."""
    if target.kind == "cuda" and not gpu_visible():
        raise ResourceError("no NVIDIA GPU found (nvidia-smi sees none): CUDA kernels can be built here with "
                            "tg.build, but not run, timed or tuned")
    if target.kind == "opencl":
        from tilegraph.runtime.opencl import available  # noqa: PLC0415 (pyopencl is optional)

        if not available():
            raise ResourceError("no OpenCL device found (install pyopencl and an OpenCL driver such as PoCL)")
