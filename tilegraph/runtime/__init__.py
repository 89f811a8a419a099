"""Running compiled kernels: `Kernel` (ctypes, checked arguments), thread control, timing."""

from tilegraph.runtime.kernel import Kernel, load_library
from tilegraph.runtime.threads import get_num_threads, reset_num_threads, set_num_threads
from tilegraph.runtime.timer import TimingResult, measure

__all__ = ["Kernel", "TimingResult", "get_num_threads", "load_library", "measure", "reset_num_threads",
           "set_num_threads"]
