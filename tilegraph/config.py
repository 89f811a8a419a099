"""Where tilegraph keeps files: the build cache and user data (tuning databases, logs).

    TILEGRAPH_CACHE_DIR   overrides the cache root (default: platformdirs user_cache_dir("tilegraph"))
    TILEGRAPH_DATA_DIR    overrides the data root  (default: platformdirs user_data_dir("tilegraph"))

The functions only compute paths; whoever writes under them creates the folders it needs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_DIR_ENV = "TILEGRAPH_CACHE_DIR"
DATA_DIR_ENV = "TILEGRAPH_DATA_DIR"
APP_NAME = "tilegraph"


def cache_dir() -> Path:
    """The root of tilegraph's caches (compiled kernels live under `cache_dir() / "build"`)."""
    override = os.environ.get(CACHE_DIR_ENV)
    return Path(override).expanduser() if override else Path(platformdirs.user_cache_dir(APP_NAME))


def data_dir() -> Path:
    """The root of tilegraph's persistent data (tuning databases)."""
    override = os.environ.get(DATA_DIR_ENV)
    return Path(override).expanduser() if override else Path(platformdirs.user_data_dir(APP_NAME))
