"""Tuning: search strategies, safe measurement (builder, runner) and the tuning database."""

from tilegraph.tune.apply import best_schedule
from tilegraph.tune.database import Database, MemoryDatabase, Record, SQLiteDatabase, open_database
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.result import TuneResult
from tilegraph.tune.strategy import STRATEGIES, Candidate, SearchStrategy, TuneContext
from tilegraph.tune.tune import tune

__all__ = ["tune", "TuneOptions", "best_schedule", "TuneResult", "MeasurePolicy", "Database", "SQLiteDatabase", "MemoryDatabase",
           "Record", "open_database", "STRATEGIES", "SearchStrategy", "Candidate", "TuneContext"]
