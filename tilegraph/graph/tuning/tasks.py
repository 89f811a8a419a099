"""Task extraction: the distinct anchor workloads of a model, each a tuning task.

    tasks = extract_tasks(graph, groups)      # groups from fusion.partition
    tasks[0].key, .workload, .weight, .flops, .nodes, .variants

A task is one anchor workload (a contraction, reduction or normalisation; by structural key, so
ResNet-50's repeated bottlenecks share tasks): its weight is how many nodes of the model compute
it, its FLOPs are one occurrence's. Fused variants (the anchor with different prologues and
epilogues) replay the anchor's tuned schedule (fusion/compose.py), so one tuning serves them all;
`variants` names the fused kernels that do. Injective chains are not tasks, nor anchors whose op
says its default schedule is final (OpDef.tuned, Winograd's transforms): they keep their default
schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tilegraph.graph.buckets import BucketPlan
from tilegraph.graph.fusion.compose import group_spec
from tilegraph.graph.fusion.partition import Group
from tilegraph.graph.ir import Graph, Node
from tilegraph.graph.kernels import KernelSpec, kernel_spec
from tilegraph.graph.ops.registry import op_def
from tilegraph.te.workload import Workload


@dataclass(frozen=True)
class Task:
    key: str                    # the anchor workload's structural key (the database's key)
    workload: Workload
    op: str                     # the anchor node's op
    nodes: tuple[str, ...]      # anchor nodes computing it, one per occurrence
    variants: tuple[str, ...]   # keys of the fused kernels that replay this task's schedule
    spec: KernelSpec            # one occurrence's spec (its node, for the vendor comparison)
    bucket: tuple[int, int] | None = None  # a bucket of the model's run-time dim (graph/buckets.py)
    share: float = 1.0          # how much of the model's calls its bucket is expected to take
    neighbours: tuple[Workload, ...] = ()  # other buckets of the same anchor, nearest first: seeds

    @property
    def weight(self) -> float:
        return len(self.nodes) * self.share

    @property
    def flops(self) -> float:
        return float(self.workload.flops())

    @property
    def name(self) -> str:
        """A readable name: op and the shapes of its first two inputs ("matmul 1x128x768 . 768x3072";
        a convolution's shows its padded input and weights), unambiguous within a model."""
        shapes = ["x".join(str(d) for d in t.shape) for t in self.workload.inputs[:2]]
        bucket = f" [{self.bucket[0]}, {self.bucket[1]}]" if self.bucket else ""
        return f"{self.op} {' . '.join(shapes)}{bucket}"


def extract_tasks(graph: Graph, groups: Sequence[Group], plan: BucketPlan | None = None) -> list[Task]:
    """One Task per distinct anchor workload of `groups`, in first-use order; with a bucket plan,
    one per bucket of an anchor over its dim (each bucket its share of the model's calls)."""
    tasks = _anchor_tasks(graph, groups)
    if plan is None:
        return tasks
    out: list[Task] = []
    for task in tasks:
        if plan.dim not in [d.name for d in task.workload.dims]:
            out.append(task)
            continue
        buckets = [task.workload.at({plan.dim: hi}) for _, hi in plan.ranges]
        for i, (bucket, wl) in enumerate(zip(plan.ranges, buckets)):
            nearest = sorted(range(len(buckets)), key=lambda j: (abs(j - i), -j))[1:]
            out.append(replace(task, key=wl.key, workload=wl, bucket=bucket, share=plan.share(i),
                               neighbours=tuple(buckets[j] for j in nearest)))
    return out


def _anchor_tasks(graph: Graph, groups: Sequence[Group]) -> list[Task]:
    nodes: dict[str, Node] = {n.name: n for n in graph.nodes}
    specs: dict[str, KernelSpec] = {}
    occurrences: dict[str, list[str]] = {}
    variants: dict[str, list[str]] = {}
    for group in groups:
        if group.anchor is None or not op_def(nodes[group.anchor].op).tuned:
            continue
        spec = kernel_spec(graph, nodes[group.anchor])
        specs.setdefault(spec.key, spec)
        occurrences.setdefault(spec.key, []).append(group.anchor)
        variant = group_spec(graph, group).key if group.fused else spec.key
        keys = variants.setdefault(spec.key, [])
        if variant not in keys:
            keys.append(variant)
    return [Task(key, spec.workload, spec.node.op, tuple(occurrences[key]), tuple(variants[key]), spec)
            for key, spec in specs.items()]


__all__ = ["Task", "extract_tasks"]
