"""`tilegraph generate`: greedy text generation with a KV cache, tokens per second for prefill and decode.

    tilegraph generate gpt2 [--prompt-len 32] [--new-tokens 64] [--time S] [--db PATH] [--threads N]
                       [--vs onnxruntime] [--exporter dynamo|legacy] [--small] [--json]
    tilegraph generate FOLDER            # FOLDER/prefill.onnx and FOLDER/decode.onnx

A reference model name (gpt2) is exported first as the prefill/decode pair (graph/zoo.export_decoder,
random weights, `--small` the reduced configuration); a folder holds such a pair. Both are compiled
once for every length up to --max-length tokens (default: prompt and new tokens together; no
length compiles anything while generating; `--time` spends its tuning on the buckets of
--prompt-len's prompt and the caches it grows into). The prompt is --prompt-len random token ids (--seed).
`--vs onnxruntime` generates from the same files with ONNX Runtime and says whether the greedy
tokens are identical; each system is timed on its own generation, one after the other.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.errors import GraphError


def add_command(sub: Any, parents: dict[str, Any], positive_float: Any, int_at_least: Any) -> None:
    gen = sub.add_parser("generate", parents=[parents["db"]],
                         help="greedy generation with a KV cache: prefill and decode tokens per second")
    gen.add_argument("model", help="gpt2 (exported first), or a folder with prefill.onnx and decode.onnx")
    gen.add_argument("--prompt-len", type=int_at_least(1), default=32, help="prompt tokens (random ids)")
    gen.add_argument("--new-tokens", type=int_at_least(1), default=64, help="tokens to generate")
    gen.add_argument("--max-length", type=int_at_least(2), default=None,
                     help="compile for prompts and caches up to this many tokens (default: prompt + new tokens)")
    gen.add_argument("--time", type=positive_float, default=None, help="seconds of tuning, both models together")
    gen.add_argument("--threads", type=int_at_least(1), default=None, help="threads (default: all cores)")
    gen.add_argument("--vs", default="", help="onnxruntime: generate with it too and compare the tokens")
    gen.add_argument("--exporter", choices=("dynamo", "legacy"), default="dynamo",
                     help="how a reference model is exported (default dynamo)")
    gen.add_argument("--small", action="store_true", help="the reference model's reduced configuration")
    gen.add_argument("--seed", type=int, default=0, help="seed of the random prompt")
    gen.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _files(args: argparse.Namespace, scratch: str) -> tuple[Path, Path]:
    folder = Path(args.model)
    if folder.is_dir():
        pair = folder / "prefill.onnx", folder / "decode.onnx"
        missing = [p.name for p in pair if not p.is_file()]
        if missing:
            raise GraphError(f"{folder}: no {' or '.join(missing)}; a decoder folder holds prefill.onnx and "
                             "decode.onnx (zoo.export_decoder writes them)")
        return pair
    if args.model != "gpt2":
        raise GraphError(f"{args.model}: neither a folder with prefill.onnx and decode.onnx nor a reference "
                         "decoder (gpt2)")
    import contextlib
    import io
    import warnings

    from tilegraph.graph import zoo

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return zoo.export_decoder("gpt2", scratch, small=args.small, exporter=args.exporter)


def cmd_generate(args: argparse.Namespace) -> int:
    from tilegraph.graph.generate import compile_decoder, greedy, onnxruntime_step
    from tilegraph.runtime import threads

    peers = [p for p in args.vs.split(",") if p]
    unknown = [p for p in peers if p != "onnxruntime"]
    if unknown:
        raise GraphError(f"--vs {','.join(unknown)}: generate compares with onnxruntime only")
    max_length = args.max_length or args.prompt_len + args.new_tokens
    if args.prompt_len + args.new_tokens > max_length:
        raise GraphError(f"--prompt-len {args.prompt_len} and --new-tokens {args.new_tokens} exceed --max-length "
                         f"{max_length}")
    if args.threads:
        threads.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="tilegraph-generate-") as scratch:
        prefill, decode = _files(args, scratch)
        import onnx

        vocab = onnx.load(str(prefill), load_external_data=False).graph.output[0].type.tensor_type.shape.dim[-1]
        ids = np.random.default_rng(args.seed).integers(0, vocab.dim_value or 1000, args.prompt_len)
        decoder = compile_decoder(prefill, decode, max_length, time_budget=args.time or 0.0, db=args.db,
                                  num_threads=args.threads, prompt_lengths=[args.prompt_len])
        decoder.generate(ids[:1], 1)  # warm: first calls map libraries and touch the arena
        runs = {"tilegraph": decoder.generate(ids, args.new_tokens)}
        if "onnxruntime" in peers:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads or threads.configured_num_threads() or 0
            sessions = [ort.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
                        for p in (prefill, decode)]
            steps = [onnxruntime_step(s) for s in sessions]
            greedy(*steps, ids[:1], 1)
            runs["onnxruntime"] = greedy(*steps, ids, args.new_tokens)
    reference = runs.get("onnxruntime")
    report = {"model": args.model, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "max_length": max_length, "tokens": list(runs["tilegraph"].tokens),
              "systems": {name: {"prefill_tokens_per_s": run.prefill_tokens_per_s,
                                 "decode_tokens_per_s": run.decode_tokens_per_s,
                                 "prefill_ms": run.prefill_s * 1e3,
                                 "decode_ms_per_token": (sum(run.decode_s) / len(run.decode_s) * 1e3
                                                         if run.decode_s else None)}
                          for name, run in runs.items()}}
    if reference is not None:
        report["tokens_identical_to_onnxruntime"] = runs["tilegraph"].tokens == reference.tokens
    if args.json:
        print(json.dumps(report))
        return 0
    from tilegraph.cli.main import _table

    rows = [[name, f"{r['prefill_tokens_per_s']:.1f}", f"{r['prefill_ms']:.2f}",
             "-" if r["decode_ms_per_token"] is None else f"{r['decode_tokens_per_s']:.1f}",
             "-" if r["decode_ms_per_token"] is None else f"{r['decode_ms_per_token']:.2f}"]
            for name, r in report["systems"].items()]
    _table(f"{args.model}: prompt {args.prompt_len}, {args.new_tokens} new tokens (greedy)",
           ["system", "prefill tok/s", "prefill ms", "decode tok/s", "decode ms/token"], rows)
    print("tokens:", " ".join(str(t) for t in report["tokens"]))
    if reference is not None:
        same = report["tokens_identical_to_onnxruntime"]
        print(f"greedy tokens {'identical to' if same else 'DIFFER from'} ONNX Runtime's")
    return 0


__all__ = ["add_command", "cmd_generate"]
