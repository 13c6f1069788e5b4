"""Running the conformance cases without pytest's runner: :func:`run_conformance`."""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from slimcache.stores.protocol import (
    Store,
    SupportsClose,
)
from slimcache.testing.base import ConformanceBase, StoreFactory
from slimcache.testing.suite import StoreConformance

__all__ = ["CaseResult", "run_conformance"]


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one conformance case run by :func:`run_conformance`.

    Attributes:
        name: The test method's name, e.g. ``"test_set_then_get"``; a parametrized case adds
            its parameter id in brackets (``"test_invalid_ttl_is_rejected_before_writing[nan]"``).
        outcome: ``"passed"``, ``"skipped"`` or ``"failed"``.
        detail: The skip reason or the failure's traceback; empty when the case passed.
    """

    name: str
    outcome: Literal["passed", "skipped", "failed"]
    detail: str = ""


async def run_conformance(
    store_factory: StoreFactory,
    *,
    suite: type[ConformanceBase] = StoreConformance,
    only: Sequence[str] | None = None,
) -> list[CaseResult]:
    """Run the conformance cases without pytest's runner, in the current event loop.

    Parametrized cases run once per parameter. Every store the cases make through
    ``store_factory`` is closed (when it has ``aclose``) after the case that made it.

    Args:
        store_factory: Makes a fresh, isolated store per call (see :class:`StoreFactory`).
        suite: The suite class, e.g. a subclass with tuned class attributes, or the parts
            of it for the abilities the store has (e.g. :class:`BasicConformance`).
        only: Names of the cases to run (e.g. ``["test_set_then_get"]``); all when ``None``.

    Returns:
        One result per case run, in definition order; a failure's ``detail`` holds its traceback.

    Example:
        >>> results = asyncio.run(run_conformance(make_store))  # doctest: +SKIP
        >>> [r for r in results if r.outcome == "failed"]  # doctest: +SKIP
        []
    """
    instance = suite()
    results: list[CaseResult] = []
    for name, arguments in _cases(suite):
        if only is not None and name not in only:
            continue
        method: Callable[..., Awaitable[None]] = getattr(instance, name)
        label = name if not arguments else f"{name}[{arguments['_id']}]"
        made: list[Store] = []
        kwargs = {k: v for k, v in arguments.items() if k != "_id"}
        try:
            await method(_tracking(store_factory, made), **kwargs)
        except pytest.skip.Exception as skipped:
            results.append(CaseResult(label, "skipped", str(skipped)))
        except (Exception, pytest.fail.Exception):
            # A conformance failure is data for the caller, reported with its traceback.
            results.append(CaseResult(label, "failed", traceback.format_exc()))
        else:
            results.append(CaseResult(label, "passed"))
        finally:
            for store in made:
                if isinstance(store, SupportsClose):
                    await store.aclose()
    return results


def _tracking(store_factory: StoreFactory, made: list[Store]) -> StoreFactory:
    """Wrap ``store_factory`` so every store it makes is appended to ``made``."""

    async def make(**options: Any) -> Store:
        store = await store_factory(**options)
        made.append(store)
        return store

    return make


def _cases(suite: type[ConformanceBase]) -> list[tuple[str, dict[str, Any]]]:
    """List ``(method name, keyword arguments)`` for each case, expanding ``parametrize``."""
    cases: list[tuple[str, dict[str, Any]]] = []
    for name in _case_names(suite):
        marks = [
            m for m in getattr(getattr(suite, name), "pytestmark", []) if m.name == "parametrize"
        ]
        if not marks:
            cases.append((name, {}))
            continue
        argname, values = marks[0].args[0], marks[0].args[1]
        ids = marks[0].kwargs.get("ids") or [repr(v) for v in values]
        cases.extend((name, {argname: v, "_id": i}) for v, i in zip(values, ids, strict=True))
    return cases


def _case_names(suite: type[ConformanceBase]) -> list[str]:
    names: list[str] = []
    for klass in reversed(suite.__mro__):
        for name, value in vars(klass).items():
            if (
                name.startswith("test_")
                and inspect.iscoroutinefunction(value)
                and name not in names
            ):
                names.append(name)
    return names
