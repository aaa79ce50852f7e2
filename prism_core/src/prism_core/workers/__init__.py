"""Workers: the processes that run what others decided.

``workers/`` sits at the top of the run machinery, below ``agents`` and ``sessions/`` and
above ``resume/``: a worker continues runs through the public resume API. It only re-exports
its public names; it must not hold behaviour.
"""

from ._delivery import deliver_notifications, run_deliverer
from ._resolver import ResolverError, entered_resolver, is_resolver_factory
from ._worker import WorkerConfigError, run_worker

__all__ = (
    "ResolverError",
    "WorkerConfigError",
    "deliver_notifications",
    "entered_resolver",
    "is_resolver_factory",
    "run_deliverer",
    "run_worker",
)
