"""Schedules: loop-nest transformations recorded as replayable traces."""

from tilegraph.schedule.schedule import BlockRV, IntRV, LoopRV, Schedule
from tilegraph.schedule.trace import Instruction, Trace

__all__ = ["BlockRV", "IntRV", "LoopRV", "Schedule", "Instruction", "Trace"]
