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
        """A private folder on the cache's filesystem (so publishing it is a rename)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=self.root))

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


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=list), encoding="utf-8")
    os.replace(temporary, path)
