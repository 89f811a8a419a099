"""Apply tuning records: the schedule tg.build uses for a workload when a database knows one.

    sch = best_schedule(wl, "cpu", db)      # Schedule replayed from the best "ok" record, or None

Only records measured on this target fingerprint are considered; a record of another machine,
compiler or tilegraph version is a miss. A miss is reported once per workload, as a plain message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilegraph.schedule import Schedule
from tilegraph.te.workload import Workload
from tilegraph.tune.database import Database, default_path, open_database
from tilegraph.tune.database.base import report_miss
from tilegraph.tune.measure import resolve_target


def best_schedule(workload: Workload, target: Any = "cpu", db: Database | str | Path | None = None) -> Schedule | None:
    """The best recorded schedule of `workload` on `target`, or None (default schedule applies).
    `db` is a Database, the path of one (opened read-only) or None for the default file."""
    if not isinstance(db, Database):
        path = Path(db) if db is not None else default_path()
        if not path.exists():  # nothing recorded yet; reading never creates a database
            report_miss(workload, str(resolve_target(target).fingerprint), f"no tuning database at {path}")
            return None
        db = open_database(path, readonly=True)
    return db.best_schedule(workload, target)
