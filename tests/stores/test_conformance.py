"""Run the shipped conformance suite against every store (ids like ``test_set_then_get[redis]``)."""

from __future__ import annotations

from slimcache.testing import StoreConformance


class TestConformance(StoreConformance):
    """Every case of :class:`slimcache.testing.StoreConformance`, once per store."""
