"""Every error tilegraph raises on purpose, in one place."""

MESSAGE_ECHO_LIMIT = 80


def shorten(value: object, limit: int = MESSAGE_ECHO_LIMIT) -> str:
    """`repr(value)` cut to `limit` characters: error messages name what was wrong without
    echoing a whole (possibly huge) input back."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TilegraphError(Exception):
    """Base class of tilegraph's own errors."""


class ScheduleError(TilegraphError):
    """A schedule primitive was asked for something illegal; the message says what and why."""


class LoweringError(TilegraphError):
    """A scheduled program cannot be lowered for the target (an unsupported construct)."""


class BuildError(TilegraphError):
    """The native compiler failed; carries its message and the path of the source it compiled."""

    def __init__(self, message: str, source_path: str | None = None):
        super().__init__(message if source_path is None else f"{message} (source: {source_path})")
        self.source_path = source_path


class WorkloadError(TilegraphError, ValueError):
    """A workload id or shape specification could not be resolved."""


class DatabaseError(TilegraphError):
    """The tuning database is unreadable, corrupt or of an unknown schema version."""


class ResourceError(TilegraphError):
    """The machine cannot provide what a request needs (memory for a workload's arrays, cores,
    a device); the message says how much was asked for and how much there is."""


class GraphError(TilegraphError, ValueError):
    """A model graph is malformed (a dangling tensor, a cycle, a shape that does not infer) or was
    called with inputs it does not take (a wrong name, shape or dtype)."""


class UnsupportedOpError(GraphError):
    """A model uses operators tilegraph cannot compile; the message names every one at once (op
    type, the nodes using it, the opset), before anything is compiled."""

    def __init__(self, unsupported: dict[str, list[str]], opset: int | None = None, source: str = "model"):
        self.unsupported = {op: list(nodes) for op, nodes in unsupported.items()}
        self.opset = opset
        parts = []
        for op, nodes in sorted(self.unsupported.items()):
            shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
            parts.append(f"{op} (nodes: {shown})")
        where = f" (opset {opset})" if opset is not None else ""
        super().__init__(f"{source}{where} uses {len(parts)} unsupported operator type(s): " + "; ".join(parts))


class RunTimeValueError(GraphError):
    """A tensor whose value decides a shape (a Reshape's shape, a reduction's axes, Resize's sizes)
    is known only at run time. `tensor` names it; `inputs` are the model inputs it is computed from
    (filled in by the frontend), which compile_model specialises on (graph/specialize.py)."""

    def __init__(self, message: str, tensor: str, inputs: tuple[str, ...] = ()):
        super().__init__(message)
        self.tensor = tensor
        self.inputs = tuple(inputs)


class ModelFileError(TilegraphError, ValueError):
    """A model file cannot be read: malformed or truncated ONNX, missing external data, a saved
    compiled model from another target or tilegraph version, an unwritable output path."""
