"""The whole conformance suite: every part, one per ability."""

from __future__ import annotations

import pytest

from slimcache.testing.basic import BasicConformance
from slimcache.testing.batch import BatchConformance
from slimcache.testing.compare_and_set import CompareAndSetConformance
from slimcache.testing.get_many import GetManyConformance
from slimcache.testing.lifecycle import LifecycleConformance
from slimcache.testing.set_if_absent import SetIfAbsentConformance
from slimcache.testing.ttl import TTLConformance

__all__ = ["StoreConformance"]


# The parts are listed last to first: the cases run (by run_conformance, which walks the
# classes from the most basic) in the order basic, TTL, set_if_absent, compare_and_set, batch,
# get_many, lifecycle.
@pytest.mark.asyncio
class StoreConformance(
    LifecycleConformance,
    GetManyConformance,
    BatchConformance,
    CompareAndSetConformance,
    SetIfAbsentConformance,
    TTLConformance,
    BasicConformance,
):
    """Test cases every store must pass; subclass it and provide a ``store_factory`` fixture.

    Cases about an ability the store lacks are skipped. The class attributes of
    :class:`~slimcache.testing.ConformanceBase` tune the suite.
    """

    # -- compressor end-to-end scenarios ----------------------------------------------------
    # Reserved: scenarios that drive the compressor against the store under test go here.
