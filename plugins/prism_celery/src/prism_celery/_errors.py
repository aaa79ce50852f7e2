"""The typed refusals of the run tasks, each with a stable ``code``."""

from __future__ import annotations

from prism_core import PrismError

__all__ = ("CeleryConfigError", "RunTaskError")


class RunTaskError(PrismError):
    """A run task refused its arguments or its agent (``ERR_PRISM_CELERY_*``); the task fails
    without retrying, having run nothing."""

    code = "ERR_PRISM_CELERY_TASK"


class CeleryConfigError(RunTaskError):
    """``create_run_tasks`` was configured wrongly (``ERR_PRISM_CELERY_CONFIG``): raised when
    the tasks are created, before any task is registered."""

    code = "ERR_PRISM_CELERY_CONFIG"
