"""check_manifest: a saved model's manifest.json checked field by field before anything is loaded.

    check_manifest(json.loads(text))     # ModelFileError naming the first bad field, e.g.
                                         # "kernels[0].sha256: expected 64 hex digits"

A saved model is a directory of native code and data; its manifest says where each piece is and
what it holds. Every field is checked for its type and form here (names confined to the model's
own folder, hashes as hex, shapes as non-negative integers, step indices in range), so a damaged or
hand-edited manifest is one clear line, never a KeyError or an out-of-range index later.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tilegraph.errors import ModelFileError

DATA_FOLDER = re.compile(r"data-[0-9a-f]{12}")
LIBRARY = re.compile(r"kernels/k[0-9]{1,6}(_b[0-9]{1,3})?\.so")
SOURCE = re.compile(r"kernels/k[0-9]{1,6}\.(cl|cu)")
SHA256 = re.compile(r"[0-9a-f]{64}")
ENTRY = re.compile(r"tg_[A-Za-z0-9_]{1,200}")
MAX_DIMS = 32

Check = Callable[[Any, str], None]


def _fail(where: str, what: str) -> None:
    raise ModelFileError(f"manifest.json: {where}: {what}")


def _is(kind: type | tuple[type, ...], label: str) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            _fail(where, f"expected {label}, got {type(value).__name__}")

    return check


def _matching(pattern: re.Pattern[str], label: str) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            _fail(where, f"expected {label}, got {str(value)[:80]!r}")

    return check


def _natural(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _fail(where, f"expected a non-negative integer, got {str(value)[:80]!r}")


def _shape(value: Any, where: str) -> None:
    if not isinstance(value, list) or len(value) > MAX_DIMS:
        _fail(where, f"expected a list of at most {MAX_DIMS} dimensions")
    for i, d in enumerate(value):
        _natural(d, f"{where}[{i}]")


def _list_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            _fail(where, f"expected a list, got {type(value).__name__}")
        for i, x in enumerate(value):
            item(x, f"{where}[{i}]")

    return check


def _dict_of(item: Check) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, f"expected an object, got {type(value).__name__}")
        for k, x in value.items():
            item(x, f"{where}.{k}")

    return check


def _object(fields: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            _fail(where, f"expected an object, got {type(value).__name__}")
        for name, field in fields.items():
            if name not in value:
                _fail(where, f"the field {name!r} is missing")
            field(value[name], f"{where}.{name}" if where else name)
        for name, field in (optional or {}).items():
            if name in value:
                field(value[name], f"{where}.{name}" if where else name)

    return check


_text = _is(str, "a string")
_texts = _list_of(_text)
_buffer = _object({"name": _text, "shape": _shape, "dtype": _text})


def _dim_entry(value: Any, where: str) -> None:
    if (not isinstance(value, list) or len(value) != 3 or not isinstance(value[0], str)
            or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in value[1:])):
        _fail(where, "expected a [name, lower, upper] dim")


def _range(value: Any, where: str) -> None:
    if not isinstance(value, list) or len(value) != 2:
        _fail(where, "expected a [lower, upper] range")
    for i, v in enumerate(value):
        _natural(v, f"{where}[{i}]")


def _axis_dims(value: Any, where: str) -> None:
    if not isinstance(value, list) or any(v is not None and not isinstance(v, str) for v in value):
        _fail(where, "expected a list of dim names or nulls, one per axis")


_DIMS_FIELDS = {"dims": _list_of(_dim_entry), "dims_limit": _dict_of(_natural)}
_GRAPH_DIMS = {"dims": _dict_of(_range), "input_dims": _dict_of(_axis_dims)}
_MANIFEST = _object({
    "format": _text, "format_version": _is(int, "an integer"), "tilegraph_version": _text, "target": _text,
    "target_fingerprint": _text, "data": _matching(DATA_FOLDER, "a folder named data-<12 hex digits>"),
    "weights": _object({"bytes": _natural, "sha256": _matching(SHA256, "64 hex digits")}),
    "graph": _object({
        "name": _text, "inputs": _texts, "outputs": _texts,
        "values": _dict_of(_object({"shape": _shape, "dtype": _text})),
        "constants": _dict_of(_natural),
        "nodes": _list_of(_object({"op": _text, "inputs": _texts, "outputs": _texts, "name": _text,
                                   "attrs": _list_of(_is(list, "a [name, value] pair"))})),
    }, _GRAPH_DIMS),
    "kernels": _list_of(_is(dict, "a kernel object")),  # plain or bucketed: _kernel
    "steps": _list_of(_object({"kernel": _natural, "node": _text, "inputs": _texts, "outputs": _texts},
                              {"nodes": _texts})),
    "views": _dict_of(_text),
    "plan": _object({"offsets": _dict_of(_natural), "arena_bytes": _natural, "lower_bound_bytes": _natural}),
}, {"rewrites": _texts, "precision": _matching(re.compile(r"fp32|bf16|int8"), "fp32, bf16 or int8")})
_CPU_KERNEL = _object({"sha256": _matching(SHA256, "64 hex digits"),
                       "entry": _matching(ENTRY, "a kernel entry point tg_<name>"),
                       "inputs": _list_of(_buffer), "outputs": _list_of(_buffer),
                       "library": _matching(LIBRARY, "kernels/k<n>.so")}, _DIMS_FIELDS)
_BUCKETED = _object({"key": _text, "tuned": _is(bool, "true or false"), "bucket_dim": _text,
                     "ranges": _list_of(_range), "dims": _list_of(_dim_entry), "buckets": _list_of(_CPU_KERNEL),
                     "inputs": _list_of(_buffer), "outputs": _list_of(_buffer)},
                    {"maps": _list_of(_list_of(_natural))})
_KERNEL = _object({
        "sha256": _matching(SHA256, "64 hex digits"),
        "entry": _matching(ENTRY, "a kernel entry point tg_<name>"), "key": _text, "tuned": _is(bool, "true or false"),
        "inputs": _list_of(_buffer), "outputs": _list_of(_buffer)}, {
        # a CPU kernel: its library; a GPU kernel: its source and launches (graph/serialize_gpu.py)
        "library": _matching(LIBRARY, "kernels/k<n>.so"), "source": _matching(SOURCE, "kernels/k<n>.cl or .cu"),
        "gpu": _object({
            "entries": _list_of(_matching(ENTRY, "a kernel entry point tg_<name>")),
            "temporaries": _list_of(_buffer),
            "launches": _list_of(_object({"name": _text, "params": _texts, "grid": _list_of(_natural),
                                          "block": _list_of(_natural), "shared_bytes": _natural,
                                          "registers": _natural})),
            "shapes": _dict_of(_shape)}), **_DIMS_FIELDS})


def check_manifest(manifest: Any) -> dict:
    """`manifest` (parsed JSON) if every field has its type and form; else ModelFileError naming the
    first field that does not. Cross-references (step -> kernel) are checked too."""
    if not isinstance(manifest, dict):
        raise ModelFileError(f"manifest.json: expected a JSON object, got {type(manifest).__name__}")
    _MANIFEST(manifest, "")
    for i, kernel in enumerate(manifest["kernels"]):
        if "buckets" in kernel:  # a bucketed CPU kernel (runtime/buckets.py): one library per bucket
            _BUCKETED(kernel, f"kernels[{i}]")
            if not kernel["buckets"] or len(kernel["buckets"]) != len(kernel["ranges"]):
                _fail(f"kernels[{i}]", "expected one bucket kernel per range")
            continue
        _KERNEL(kernel, f"kernels[{i}]")
        if ("library" in kernel) == ("source" in kernel) or ("source" in kernel) != ("gpu" in kernel):
            _fail(f"kernels[{i}]", "expected a library (a CPU kernel) or a source with its launches (a GPU kernel)")
    kernels = len(manifest["kernels"])
    for i, step in enumerate(manifest["steps"]):
        if step["kernel"] >= kernels:
            _fail(f"steps[{i}].kernel", f"{step['kernel']} names no kernel (there are {kernels})")
    for i, attr in enumerate(a for n in manifest["graph"]["nodes"] for a in n["attrs"]):
        if len(attr) != 2 or not isinstance(attr[0], str):
            _fail(f"graph.nodes attribute {i}", "expected a [name, value] pair")
    return manifest


__all__ = ["check_manifest", "DATA_FOLDER", "LIBRARY"]
