"""Conformance kits for store distributions, as a pytest plugin.

Enable it with ``pytest_plugins = ["prism_core.testing"]`` in a root ``conftest.py`` (or a test
module) so pytest rewrites the suites' assertions, then subclass the suites::

    from prism_core.testing import CheckpointStoreConformance

    class TestMyCheckpointStore(CheckpointStoreConformance):
        @pytest.fixture
        async def checkpoint_store(self):
            async with create_my_store() as store:
                yield store

        @pytest.fixture
        def checkpoint_store_factory(self):
            # Another instance on the same backend, as a second worker would open it.
            return create_my_store

``SharedCommitConformance`` is for checkpoint stores that offer the optional shared commit
(``prism_core.stores.shared_transaction``); its fixture ``shared_stores`` yields
``(checkpoints, sessions)``. ``CheckpointBatchConformance`` is for checkpoint stores that
commit several of their own saves together (``prism_core.stores.CheckpointBatchStore``), with
a ``checkpoint_store`` fixture. ``LeaseRenewalConformance`` is for checkpoint stores that renew
a lease in place (``prism_core.stores.LeaseRenewalStore``), with a ``checkpoint_store`` fixture;
``CheckpointStampConformance`` for those that read a record's version and fencing token alone
(``prism_core.stores.CheckpointStampReader``), likewise. ``RunWakeupsConformance`` is for
checkpoint stores that wake workers in other processes (``prism_core.stores.RunWakeups``):
its fixtures are the store, a factory of another instance on the same database and prefix,
a factory of a store under another prefix, and a counter of the open watches.
``EffectLedgerConformance`` is for checkpoint stores that keep an effect ledger
(``prism_core.stores.EffectLedger``), with a ``checkpoint_store`` fixture, and
``SharedCommitLedgerConformance`` for those whose shared commit carries it
(``shared_stores``); ``SessionDeletionConformance`` for session stores that delete a session
(``prism_core.stores.SessionDeleter``), with a ``session_store`` fixture.

Each test is an ``@pytest.mark.anyio`` coroutine that runs on the backends the
``anyio_backend`` fixture in scope selects. The suite classes have no ``Test`` prefix, so
pytest collects only their subclasses. This plugin is never registered by entry point:
importing ``prism_core`` does not import pytest.
"""

from __future__ import annotations

import pytest

# Registered before the suites are imported so pytest can still rewrite their assertions.
pytest.register_assert_rewrite(
    "prism_core.testing._batch_suite",
    "prism_core.testing._checkpoint_suite",
    "prism_core.testing._commit_suite",
    "prism_core.testing._effects_suite",
    "prism_core.testing._lease_suite",
    "prism_core.testing._session_suite",
    "prism_core.testing._stamp_suite",
    "prism_core.testing._races",
    "prism_core.testing._run_tail_suite",
    "prism_core.testing._status_index_suite",
    "prism_core.testing._wakeups_suite",
)

from ._batch_suite import CheckpointBatchConformance  # noqa: E402
from ._checkpoint_suite import CheckpointStoreConformance  # noqa: E402
from ._commit_suite import SharedCommitConformance  # noqa: E402
from ._effects_suite import (  # noqa: E402
    EffectLedgerConformance,
    SessionDeletionConformance,
    SharedCommitLedgerConformance,
)
from ._lease_suite import LeaseRenewalConformance  # noqa: E402
from ._session_suite import SessionStoreConformance  # noqa: E402
from ._stamp_suite import CheckpointStampConformance  # noqa: E402
from ._status_index_suite import CheckpointStatusIndexConformance  # noqa: E402
from ._wakeups_suite import RunWakeupsConformance  # noqa: E402

__all__ = (
    "CheckpointBatchConformance",
    "EffectLedgerConformance",
    "SessionDeletionConformance",
    "SharedCommitLedgerConformance",
    "CheckpointStampConformance",
    "CheckpointStatusIndexConformance",
    "CheckpointStoreConformance",
    "LeaseRenewalConformance",
    "RunWakeupsConformance",
    "SessionStoreConformance",
    "SharedCommitConformance",
)
