"""errors.py: one family users catch, and bounded echoes of bad input."""

import tilegraph as tg
from tilegraph.errors import BuildError, DatabaseError, ResourceError, WorkloadError, shorten


def test_every_deliberate_error_is_a_tilegraph_error():
    for cls in (tg.ScheduleError, tg.LoweringError, BuildError, WorkloadError, DatabaseError, ResourceError):
        assert issubclass(cls, tg.TilegraphError)
    assert issubclass(WorkloadError, ValueError)


def test_shorten_bounds_what_a_message_echoes():
    assert shorten("abc") == "abc" and shorten([1, 2]) == "[1, 2]"
    long = shorten("x" * 10_000)
    assert len(long) == 80 and long.endswith("...")
    assert shorten(list(range(1000)), limit=20) == "[0, 1, 2, 3, 4, 5..."
