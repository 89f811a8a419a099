"""A content-addressed cache of compiled kernels.

    <root>/<key>/kernel.c        the source that was compiled
    <root>/<key>/kernel.so       the shared library
    <root>/<key>/manifest.json   written last; records the .so's sha256

An entry is valid only when its manifest parses and names the .so's current hash; anything
else (a crash mid-write, a truncated file) is broken and gets rebuilt. Builders work in a
private temporary folder and publish it with one atomic rename, so concurrent builders of the
same key all succeed and readers never see half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

SOURCE_FILE = "kernel.c"
LIBRARY_FILE = "kernel.so"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
_PUBLISH_ATTEMPTS = 5


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 over a canonical JSON of everything that determines the compiled bytes."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=list).encode()).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class BuildCache:
    """The cache under `root` (normally config.cache_dir() / "build")."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def entry_dir(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str) -> Path | None:
        """The library of a valid entry, or None when the entry is missing or broken."""
        entry = self.entry_dir(key)
        try:
            manifest = json.loads((entry / MANIFEST_FILE).read_text(encoding="utf-8"))
            library = entry / LIBRARY_FILE
            if manifest.get("format") == MANIFEST_FORMAT and manifest.get("so_sha256") == sha256_file(library):
                return library
        except (OSError, ValueError, AttributeError):
            pass
        return None

    def new_workdir(self, key: str) -> Path:
        """A private folder on the cache's filesystem (so publishing it is a rename). Its name
        carries the builder's pid, so the first build of each process can remove the folders of
        builders that died (SIGKILL) before publishing."""
        self.root.mkdir(parents=True, exist_ok=True)
        if str(self.root) not in _swept:
            _swept.add(str(self.root))
            self.remove_stale_workdirs()
        return Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-{os.getpid()}-", dir=self.root))

    def remove_stale_workdirs(self) -> int:
        """Delete temporary and trash folders whose builder process is gone; returns how many."""
        removed = 0
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return 0
        for entry in entries:
            if not entry.name.startswith((".tmp-", ".trash-")):
                continue
            pid = _pid_of(entry.name)
            if pid is not None and _alive(pid):
                continue
            if pid is None and time.time() - entry.stat(follow_symlinks=False).st_mtime < _ORPHAN_AGE_S:
                continue  # no pid in the name (an older tilegraph): only once it is clearly abandoned
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
        return removed

    def publish(self, workdir: Path, key: str, manifest: dict[str, Any]) -> Path:
        """Seal `workdir` (holding kernel.c and kernel.so) with its manifest and move it into
        place; returns the library path of the entry that ends up valid."""
        library = workdir / LIBRARY_FILE
        write_json_atomic(workdir / MANIFEST_FILE,
                          {**manifest, "format": MANIFEST_FORMAT, "key": key, "so_sha256": sha256_file(library)})
        entry = self.entry_dir(key)
        for _ in range(_PUBLISH_ATTEMPTS):
            try:
                os.rename(workdir, entry)
                return entry / LIBRARY_FILE
            except OSError:
                if not entry.exists():
                    continue
            existing = self.lookup(key)
            if existing is not None:  # another builder won the race with an identical entry
                shutil.rmtree(workdir, ignore_errors=True)
                return existing
            self._discard(entry)
        raise OSError(f"could not publish build cache entry {entry}")

    def _discard(self, entry: Path) -> None:
        """Move a broken entry aside (atomic) and delete it."""
        trash = self.root / f".trash-{uuid.uuid4().hex}"
        try:
            os.rename(entry, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)


_swept: set[str] = set()
_ORPHAN_AGE_S = 3600.0


def _pid_of(name: str) -> int | None:
    """The pid in `.tmp-<key16>-<pid>-<random>` (None for other names)."""
    parts = name.split("-")
    if name.startswith(".tmp-") and len(parts) >= 4 and parts[2].isdigit():
        return int(parts[2])
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=list), encoding="utf-8")
    os.replace(temporary, path)
