"""Running compiled kernels: `Kernel` (ctypes, checked arguments), thread control and the thread
pool (`set_pool_enabled`, `configure_pool`), timing."""

from tilegraph.runtime.kernel import Kernel, load_library
from tilegraph.runtime.thread_pool import configure_pool, set_pool_enabled
from tilegraph.runtime.threads import get_num_threads, reset_num_threads, set_num_threads
from tilegraph.runtime.timer import TimingResult, measure

__all__ = ["Kernel", "TimingResult", "configure_pool", "get_num_threads", "load_library", "measure",
           "reset_num_threads", "set_num_threads", "set_pool_enabled"]
