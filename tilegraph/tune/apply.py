"""Apply tuning records: the schedule tg.build uses for a workload when a database knows one.

    sch = best_schedule(wl, "cpu", db)      # Schedule replayed from the best "ok" record, or None

Only records measured on this target fingerprint are considered; a record of another machine,
compiler or tilegraph version is a miss. A miss is reported once per workload, as a plain message.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.schedule import Schedule
from tilegraph.te.workload import Workload
from tilegraph.tune.database import Database, default_path, open_database
from tilegraph.tune.measure import resolve_target

log = logging.getLogger("tilegraph.tune")
MAX_RECORDS_TRIED = 8
_reported: set[tuple[str, str]] = set()


def best_schedule(workload: Workload, target: Any = "cpu", db: Database | str | Path | None = None) -> Schedule | None:
    """The best recorded schedule of `workload` on `target`, or None (default schedule applies)."""
    fp = str(resolve_target(target).fingerprint)
    if not isinstance(db, Database):
        path = Path(db) if db is not None else default_path()
        if not path.exists():  # nothing recorded yet; reading never creates a database
            _report_once(workload, fp, f"no tuning database at {path}")
            return None
        db = open_database(path, readonly=True)
    database = db
    failures = []
    for record in database.top_k(workload.key, fp, MAX_RECORDS_TRIED):
        try:
            return Schedule.replay(workload, record.trace_json)
        except ScheduleError as e:  # an imported or stale record: try the next best, and say so
            failures.append(str(e))
    why = f"its best records do not replay ({failures[0][:200]})" if failures else "no tuning record for this target"
    _report_once(workload, fp, why)
    return None


def _report_once(workload: Workload, fp: str, why: str) -> None:
    if (workload.key, fp) in _reported:
        return
    _reported.add((workload.key, fp))
    log.info("%s (%s): %s; using the default schedule. Run `tilegraph tune` to tune it.", workload.op_name,
             workload.key, why)
