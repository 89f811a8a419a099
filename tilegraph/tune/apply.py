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
from tilegraph.tune.database import Database, open_database
from tilegraph.tune.measure import resolve_target

log = logging.getLogger("tilegraph.tune")
_reported: set[tuple[str, str]] = set()


def best_schedule(workload: Workload, target: Any = "cpu", db: Database | str | Path | None = None) -> Schedule | None:
    """The best recorded schedule of `workload` on `target`, or None (default schedule applies)."""
    fp = str(resolve_target(target).fingerprint)
    database = open_database(db)
    record = database.best(workload.key, fp)
    if record is not None:
        try:
            return Schedule.replay(workload, record.trace_json)
        except ScheduleError as e:
            _report_once(workload, fp, f"its best record no longer replays ({e})")
            return None
    _report_once(workload, fp, "no tuning record for this target")
    return None


def _report_once(workload: Workload, fp: str, why: str) -> None:
    if (workload.key, fp) in _reported:
        return
    _reported.add((workload.key, fp))
    log.info("%s (%s): %s; using the default schedule. Run `tilegraph tune` to tune it.", workload.op_name,
             workload.key, why)
