"""Pipeline parallelism: schedules as data, a simulator, one runtime, and the strategies."""

from . import schedules
from .actions import Action, Schedule, ScheduleError
from .partition import partition
from .pipedream import PipeDream
from .simulator import check, simulate
from .strategy import Pipeline

__all__ = ["Action", "PipeDream", "Pipeline", "Schedule", "ScheduleError", "check", "partition",
           "schedules", "simulate"]
