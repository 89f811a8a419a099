"""Native builds: toolchain discovery, compile_c, and the content-addressed build cache."""

from tilegraph.build.cache import BuildCache
from tilegraph.build.compile import build_cache, compile_c

__all__ = ["BuildCache", "build_cache", "compile_c"]
