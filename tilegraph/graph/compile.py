"""compile_model: a graph (or an ONNX model, or a torch module) into a CompiledModel.

    model = compile_model(g, target="cpu", db=None, time_budget=0)
    model = compile_model("resnet50.onnx")                     # from_onnx first
    model = compile_model(module, example_inputs=(x,))         # from_torch first
    model = compile_model(g, fuse=False)                       # one kernel per node (to measure fusion)
    model = compile_model(g, orchestration="greedy")           # Hidet's greedy fusion groups as they are
    model = compile_model(g, extra_rewrites=("conv_to_gemm",)) # optional rewrites (passes.OPTIONAL)
    model = compile_model(g, skip_rewrites=("winograd_conv",)) # without a default one (passes.FLOAT32_CPU)
    model = compile_model(g, time_budget=180, db="tune.db")    # tune the model's tasks first
    model = compile_model("bert.onnx", input_shapes={"input_ids": (1, 128)})   # fix symbolic extents
    model = compile_model("bert.onnx", dims={"seq": (1, 512)})   # one model for every length 1..512
    model = compile_model("bert.onnx", dims={"seq": (1, 512)}, buckets={"seq": [16, 64, 128]})  # its buckets
    model = compile_model("bert.onnx", dims={"seq": (1, 512)}, expected={"seq": [32, 32, 100]})  # tuning weighed so
    model = compile_model("m.onnx", values={"axes": [1]})      # inputs that decide shapes, as constants
    model = compile_model("bert.onnx", precision="bf16")       # products read bfloat16, sum in float32
    model = compile_model("bert.onnx", precision="int8")       # weights int8, activations quantized per call
    model.precision_report.line()                              # its accuracy gate (graph/precision.py)
    print(model.tuning.table())

Steps: the graph passes (passes.optimize; then for a float32 model on a CPU target the rewrites of
passes.FLOAT32_CPU, Winograd's 3x3 convolutions), the greedy fusion groups (fusion.partition), then
with orchestration="blp" (the default) the kernels a binary linear program picks among measured
candidates (fusion.choose, measured on the target's device; greedy for a target this machine
cannot run or time), each built from the database's best record of its anchor, else the default
schedule; the memory plan.

An ONNX model whose shapes depend on input values (a Reshape's shape, a reduction's axes given as
graph inputs) compiles to a SpecializedModel (graph/specialize.py): one CompiledModel per set of
those values, made at the first run with them; `values=` binds them up front instead.

`progress` is told the stage and the kernels built so far (a CompileProgress shows them once a
compile has run a few seconds; the CLI uses one).

`time_budget` (seconds) and/or `trials` (measurements, earlier runs' included) first tune the
model's tasks into `db` (the default database when None) with the task scheduler
(graph/tuning/); `model.tuning` is then the per-task report. 0 and None build without tuning,
from whatever the database holds. `num_threads` is what tasks are timed with (default: all cores,
as the model runs); `tune_progress` a TuningProgress or any callable(scheduler, message).
`evict_weights=True` times each candidate with its constant inputs flushed from the caches
(MeasurePolicy.evict_constants): right for a model that streams more weights than the last-level
cache holds at every call (a decoder's step, graph/generate.py), pessimistic otherwise.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilegraph.errors import GraphError, ResourceError, RunTimeValueError
from tilegraph.graph.buckets import bucket_kernels, bucket_plan
from tilegraph.graph.compile_progress import stage
from tilegraph.graph.construct import WithConstructed, construct_schedules
from tilegraph.graph.device_model import DeviceModel
from tilegraph.graph.dims import with_dims_of
from tilegraph.graph.frontends import onnx_qdq
from tilegraph.graph.fusion.choose import orchestrate_kernels
from tilegraph.graph.fusion.compose import group_spec
from tilegraph.graph.fusion.partition import Group, partition
from tilegraph.graph.ir import Graph
from tilegraph.graph.kernels import build_kernels, kernel_spec
from tilegraph.graph.model import CompiledModel, Step
from tilegraph.graph.ops.registry import op_def
from tilegraph.graph.passes import FLOAT32_CPU, eliminate_dead_code, optimize, optimize_float32_cpu
from tilegraph.graph.passes.copy_moving_reshapes import copy_moving_reshapes
from tilegraph.graph.passes.gemms_read_bfloat16 import gemms_read_bfloat16
from tilegraph.graph.passes.gemms_read_int8 import gemms_read_int8
from tilegraph.graph.plan import ALIGN, plan_memory
from tilegraph.graph.precision import PrecisionReport, check_accuracy
from tilegraph.graph.prepack import prepack_weights
from tilegraph.graph.specialize import SpecializedModel
from tilegraph.graph.tuning.tasks import extract_tasks
from tilegraph.runtime.backends import backend_for, require_runnable
from tilegraph.runtime.device_memory import device_alignment
from tilegraph.target import (
    Target,
    as_target,
    has_bf16_dot,
    has_int8_dot,
    has_matrix_tiles,
    host_supports,
    int8_dot_lanes,
)

if TYPE_CHECKING:
    from tilegraph.tune.database import Database

ORCHESTRATIONS = ("greedy", "blp")
# bf16: products read bfloat16 and accumulate in float32 (gemms_read_bfloat16); int8: products with
# constant weights on dynamically quantized activations, u8 x s8 summed in int32 (gemms_read_int8)
PRECISIONS = ("fp32", "bf16", "int8")
# the default: end to end as fast as greedy or faster on ResNet-50, MobileNet-V2 and BERT, 3% slower
# on GPT-2 inside a 4-5% spread (docs/performance.md); a target this machine cannot run gets greedy
DEFAULT_ORCHESTRATION = "blp"


def as_graph(model: Any, example_inputs: Any = None, input_shapes: Any = None, dims: Any = None) -> Graph:
    """A Graph from a Graph, an ONNX path or ModelProto (`input_shapes` fixing symbolic extents,
    `dims` keeping them run-time dims with ranges), or a torch.nn.Module (with example inputs)."""
    for label, given in (("input_shapes", input_shapes), ("dims", dims)):
        if given is not None and (isinstance(model, Graph) or hasattr(model, "forward")):
            raise GraphError(f"{label} applies to ONNX models (a graph has its own dims, a module static shapes)")
    if isinstance(model, Graph):
        return model
    if isinstance(model, (str, os.PathLike)) or type(model).__name__ == "ModelProto":
        from tilegraph.graph.frontends.onnx import from_onnx

        return from_onnx(model, input_shapes=input_shapes, dims=dims)
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        if example_inputs is None:
            raise GraphError("compiling a torch module needs example_inputs (a tuple of tensors)")
        from tilegraph.graph.frontends.torch import from_torch

        return from_torch(model, example_inputs)
    raise GraphError(f"cannot compile a {type(model).__name__}: pass a tilegraph Graph, an ONNX path or "
                     "ModelProto, or a torch.nn.Module with example_inputs")


def compile_model(model: Any, target: Any = "cpu", db: Any = None, time_budget: float = 0.0,
                  example_inputs: Any = None, optimize_graph: bool = True, workers: int | None = None,
                  progress: Callable[[int, int], None] | None = None, fuse: bool = True,
                  orchestration: str = DEFAULT_ORCHESTRATION, extra_rewrites: tuple[str, ...] = (),
                  trials: int | None = None, num_threads: int | None = None,
                  tune_progress: Callable[[Any, str], None] | None = None,
                  input_shapes: Any = None, values: Any = None, construct: bool = True,
                  prepack: bool = True, precision: str = "fp32", accuracy: float | None = None,
                  accuracy_check: bool = True, skip_rewrites: tuple[str, ...] = (),
                  cluster: str | None = None, dims: Any = None, buckets: Any = None,
                  expected: Any = None, evict_weights: bool = False) -> CompiledModel | SpecializedModel:
    start = time.perf_counter()
    if precision not in PRECISIONS:
        raise GraphError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if accuracy is not None and (isinstance(accuracy, bool) or not isinstance(accuracy, (int, float))
                                 or not math.isfinite(accuracy) or accuracy <= 0):
        raise GraphError(f"accuracy must be a relative error > 0 (or None for the default rule), got {accuracy!r}")
    onnx_model = isinstance(model, (str, os.PathLike)) or type(model).__name__ == "ModelProto"
    if values is not None and not onnx_model:
        raise GraphError("values= binds inputs of an ONNX model (a graph or a module has no such inputs)")
    unknown_skips = [name for name in skip_rewrites if name not in FLOAT32_CPU]
    if unknown_skips:  # said whatever the precision or target (they may not run the rewrites at all)
        raise GraphError(f"unknown default rewrite(s) {', '.join(unknown_skips)} in skip_rewrites; "
                         f"known: {', '.join(FLOAT32_CPU)}")
    if orchestration not in ORCHESTRATIONS:
        raise GraphError(f"unknown orchestration {orchestration!r}; choose one of {', '.join(ORCHESTRATIONS)}")
    if (not isinstance(time_budget, (int, float)) or isinstance(time_budget, bool) or not math.isfinite(time_budget)
            or time_budget < 0):
        raise GraphError(f"time_budget must be a finite number of seconds >= 0, got {time_budget!r}")
    if trials is not None and (not isinstance(trials, int) or isinstance(trials, bool) or trials < 0):
        raise GraphError(f"trials must be a non-negative integer, got {trials!r}")
    for label, value in (("num_threads", num_threads), ("workers", workers)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise GraphError(f"{label} must be a positive integer or None, got {value!r}")
    if db is not None and not isinstance(db, (str, os.PathLike)) and not hasattr(db, "best_schedule"):
        raise GraphError(f"db must be a database path or a tuning database, got {type(db).__name__}")
    tune = time_budget > 0 or bool(trials)
    tgt = as_target(target)
    gpu = backend_for(tgt).is_gpu
    if gpu and precision != "fp32":
        raise GraphError(f"precision={precision!r} is for CPU targets (the GPU printers keep bfloat16 scalar and "
                         f"untested on devices); compile for {tgt.kind} in fp32")
    if gpu:
        require_runnable(tgt)
    if not tune and isinstance(db, (str, os.PathLike)) and not os.path.exists(db):
        db = None  # nothing to read from a database that does not exist yet (none is made without tuning)
    if tune or isinstance(db, (str, os.PathLike)):
        from tilegraph.tune.database import open_database

        db = open_database(db, readonly=not tune)
    if values:
        from tilegraph.graph.frontends.onnx import bind_inputs

        model = bind_inputs(model, values, str(model) if isinstance(model, (str, os.PathLike)) else "model")
    stage(progress, "reading the model")
    told = onnx_qdq.INTEGER_PRODUCTS.get()  # a QDQ model's products on the integers where the target has a dot step
    token = onnx_qdq.INTEGER_PRODUCTS.set(int8_dot_lanes(tgt) > 0 if told is None else told)
    try:
        graph = as_graph(model, example_inputs, input_shapes, dims)
    except RunTimeValueError as err:
        if not onnx_model or not err.inputs:
            raise
        from tilegraph.graph.frontends.onnx import load_model

        proto = load_model(model)
        options = dict(target=tgt, db=db, time_budget=time_budget, optimize_graph=optimize_graph, workers=workers,
                       progress=progress, fuse=fuse, orchestration=orchestration, extra_rewrites=extra_rewrites,
                       trials=trials, num_threads=num_threads, tune_progress=tune_progress, input_shapes=input_shapes,
                       construct=construct, prepack=prepack, precision=precision, accuracy=accuracy,
                       accuracy_check=accuracy_check, skip_rewrites=skip_rewrites, cluster=cluster, dims=dims,
                       buckets=buckets, expected=expected, evict_weights=evict_weights)
        return SpecializedModel(proto, err.inputs, lambda bound: compile_model(proto, values=bound, **options),
                                str(err).split(";")[0])
    finally:
        onnx_qdq.INTEGER_PRODUCTS.reset(token)
    if graph.dims and (gpu or precision != "fp32"):
        raise GraphError(f"run-time dims ({', '.join(graph.dims)}) compile for CPU targets in fp32 so far; "
                         "fix the shapes with input_shapes for this target or precision")
    source = graph
    rewrites: list[str] = []
    stage(progress, "graph passes")
    if optimize_graph:
        graph, rewrites = optimize(graph, extra=extra_rewrites)
    float_graph = graph
    without_hardware = None
    if precision == "bf16" and not has_bf16_dot(tgt):
        # as OpenVINO does: without a bf16 dot product the conversions only cost (measured here as an
        # AVX2 host: BERT-base 168 ms in bf16 against 102 in float32), so the model stays float32
        without_hardware = PrecisionReport(precision, "fp32", math.nan, math.nan, math.inf,
                                           f"{tgt.isa} target without AVX512_BF16: bfloat16 would only add "
                                           "conversions", False)
        precision = "fp32"
    if precision == "int8" and not has_int8_dot(tgt):
        # without an int8 dot product the int32 multiply-adds cost more than float32 FMAs (a QDQ
        # ResNet-50 on an AVX2 target before its vpmaddwd step: 133 ms on the integers, 42 ms in
        # float32); AVX2's step pays for QDQ files (onnx_qdq.INTEGER_PRODUCTS) but this path's
        # per-call quantization of activations was not measured with it, so it stays float32 there
        without_hardware = PrecisionReport(precision, "fp32", math.nan, math.nan, math.inf,
                                           f"{tgt.isa} target without an int8 dot product (AVX512_VNNI, "
                                           "AVX-VNNI): int8 products would run slower than float32", False)
        precision = "fp32"
    if precision == "bf16":  # products read bfloat16, accumulate in float32 (the rest stays float32)
        graph = eliminate_dead_code(gemms_read_bfloat16(graph, rewrites, tiles_only=has_matrix_tiles(tgt, "bfloat16")))
    if precision == "int8":  # products with constant weights on the integers, the rest float32
        graph = eliminate_dead_code(gemms_read_int8(graph, rewrites))
    if optimize_graph and precision == "fp32" and not gpu:
        graph = optimize_float32_cpu(with_dims_of(graph, source), rewrites, skip_rewrites)  # dims: least_shape
    graph = copy_moving_reshapes(with_dims_of(graph, source).verify(), rewrites)
    graph.extents  # noqa: B018 (the run-time extents of every tensor, or the node that cannot take them)
    _check_tensor_sizes(graph)
    plan = bucket_plan(graph, buckets, expected)
    stage(progress, "fusion groups")
    groups = partition(graph, fuse=fuse)
    report = None
    tuning_s = 0.0
    if tune:
        from tilegraph.graph.tuning import tune_model
        from tilegraph.runtime import threads

        timed_threads = num_threads or threads.configured_num_threads() or tgt.num_cores  # as the model runs
        session_options: dict[str, Any] = {} if cluster is None else {"cluster": cluster}
        if evict_weights:  # each candidate timed with its weights read from memory, as in a model streaming
            from tilegraph.tune.measure import MeasurePolicy  # more weights than the caches hold (a decode step)

            session_options["policy"] = MeasurePolicy(evict_constants=True)
        report = tune_model(graph, groups, tgt, db, time_budget or None, trials, timed_threads, tune_progress,
                            session_options=session_options, plan=plan)
        tuning_s = report.elapsed_s
    records = db  # the database as given (the float32 fallback below reads it, not this compile's picks)
    constructed: dict[str, str] = {}
    if construct and not gpu:  # tasks without a record get Gensor's pick, not the plain default (construct.py)
        stage(progress, "constructing schedules")
        # (not per bucket: a bucket without a record of its own runs the bucket above's kernel, graph/buckets.py)
        constructed = construct_schedules(extract_tasks(graph, groups), tgt, db)
        if constructed:
            db = WithConstructed(db, constructed)
    fallbacks: list[str] = []
    chosen = None
    # BLP measures its candidates on this machine: the target must run here and be timeable
    # (a GPU present; not another CPU architecture under an emulator)
    if fuse and orchestration == "blp" and host_supports(tgt) and backend_for(tgt).timeable:
        stage(progress, "building and timing fusion candidates")
        specs, built, chosen = orchestrate_kernels(graph, groups, tgt, db, workers, progress)
        fallbacks += chosen.failures
    else:
        stage(progress, "building kernels")
        specs, built = _greedy_kernels(graph, groups, tgt, db, workers, progress, fallbacks)
    if plan is not None:  # every kernel over the plan's dim: one kernel per bucket, dispatched natively
        stage(progress, f"building the buckets of {plan.describe()}")
        built = bucket_kernels(specs, built, plan, tgt, records, workers, progress)
    produced = {o for spec in specs for o in spec.outputs}
    views = {node.outputs[0]: node.inputs[0] for node in graph.nodes
             if op_def(node.op).view and node.outputs[0] not in produced}
    keys = list(dict.fromkeys(spec.key for spec in specs))
    index = {key: i for i, key in enumerate(keys)}
    steps = [Step(index[spec.key], spec.label, spec.arguments, spec.outputs, spec.nodes) for spec in specs]
    kernel_objects = [built[k].kernel for k in keys]
    prepacked: tuple[str, ...] = ()
    if prepack and not gpu:  # weights a kernel packs at every call are packed once, here (prepack.py)
        stage(progress, "prepacking weights")
        graph, steps, kernel_objects, prepacked = prepack_weights(graph, steps, kernel_objects, tgt, workers or 2)
    stage(progress, "memory plan")
    align = device_alignment(tgt) if gpu else ALIGN
    plan = plan_memory([(s.inputs, s.outputs) for s in steps], graph, views, align)
    model_class = DeviceModel if gpu else CompiledModel
    spec_of = {spec.key: spec for spec in specs}
    from_constructed = {k for k in keys if built[k].tuned and _schedule_key(spec_of[k]) in constructed}
    model_ = model_class(graph, steps, kernel_objects, keys,
                         [built[k].tuned and k not in from_constructed for k in keys], plan,
                         views, tgt, rewrites, time.perf_counter() - start - tuning_s)
    model_.constructed = tuple(k for k in keys if k in from_constructed)
    model_.prepacked = prepacked
    model_.fallbacks = tuple(fallbacks)
    model_.tuning = report
    model_.orchestration = chosen
    if precision == "fp32":
        model_.precision_report = without_hardware
        return model_
    model_.precision = precision
    model_.precision_report = (check_accuracy(model_, float_graph, graph, precision, accuracy) if accuracy_check
                               else PrecisionReport(precision, precision, math.nan, math.nan, math.inf, "", False))
    if model_.precision_report.passed:
        return model_
    # nothing runs less accurate than asked: float32, from the database's records (no second tuning
    # budget) and the same options (`model` has its values bound already)
    stage(progress, "accuracy gate failed: compiling in float32")
    fallback = compile_model(model, target, records, 0.0, example_inputs, optimize_graph=optimize_graph, workers=workers,
                             progress=progress, fuse=fuse, orchestration=orchestration, extra_rewrites=extra_rewrites,
                             num_threads=num_threads, input_shapes=input_shapes, construct=construct, prepack=prepack,
                             skip_rewrites=skip_rewrites)
    fallback.precision_report = model_.precision_report
    return fallback


def _schedule_key(spec: Any) -> str:
    """The workload whose schedule a kernel spec is built from: a fused group's anchor, else its own."""
    anchor = getattr(spec, "anchor", None)
    return anchor.workload.key if anchor is not None else spec.key


def _check_tensor_sizes(graph: Graph) -> None:
    """Refuse, before building or allocating anything, zero-sized tensors a kernel would read or
    write (passes.empty_tensors_as_constants leaves none where it can), and a model whose inputs
    and outputs alone exceed this machine's memory."""
    from tilegraph.testing.data import available_memory

    touched = {t for node in graph.nodes for t in (*node.inputs, *node.outputs)}
    for name, t in graph.values.items():  # an empty input no kernel reads (a pass made it a constant) is fine
        if t.size == 0 and name not in graph.constants and name in touched:
            raise GraphError(f"tensor {name!r} is zero-sized ({t}); tilegraph does not compile zero-sized tensors")
    have = available_memory()
    need = sum(graph.values[n].nbytes for n in {*graph.inputs, *graph.outputs} if n not in graph.constants)
    largest = max((t.nbytes for n, t in graph.values.items() if n not in graph.constants), default=0)
    if have is not None and max(need, largest) > have:
        raise ResourceError(f"model {graph.name!r} needs at least {max(need, largest) / 2**30:.1f} GiB for its "
                            f"tensors; {have / 2**30:.1f} GiB is available")


def _greedy_kernels(graph: Graph, groups: list[Group], tgt: Target, db: Database | None, workers: int | None,
                    progress: Any, fallbacks: list[str]) -> tuple[list[Any], dict[str, Any]]:
    """One kernel per greedy group; a fused group whose invariant fails runs as separate kernels
    (Hidet's fallback), the reason appended to `fallbacks`."""
    specs = [group_spec(graph, g) for g in groups]
    errors: dict[str, Any] = {}
    built = build_kernels(specs, tgt, db, workers, progress, errors=errors)
    if not errors:
        return specs, built
    retry: list[Any] = []
    final: list[Any] = []
    for spec in specs:
        if spec.key not in errors:
            final.append(spec)
            continue
        fallbacks.append(f"{', '.join(spec.nodes)}: {errors[spec.key]}")
        parts = [kernel_spec(graph, n) for n in graph.nodes if n.name in spec.nodes and not op_def(n.op).view]
        retry += parts
        final += parts
    built.update(build_kernels(retry, tgt, db, workers, progress))
    return final, built


__all__ = ["compile_model", "as_graph", "ORCHESTRATIONS", "DEFAULT_ORCHESTRATION", "PRECISIONS"]
