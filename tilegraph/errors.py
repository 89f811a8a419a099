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
