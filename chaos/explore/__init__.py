"""Finding the failures nobody scripted: random fault schedules over what an environment allows
(schedule.py), seeded so that a run can be replayed."""
from chaos.explore.schedule import Schedule, ScheduledFault, generate, load_schedule

__all__ = ["Schedule", "ScheduledFault", "generate", "load_schedule"]
