"""Answering now and extending the summary later: the compressor's ``refresh="background"``.

When the trigger fires on a request whose answer would still be within the ceiling (the pinned
messages, the summary the store has, and every message after it), the compressor answers it at
once with :func:`stale_answer` and offers the extension to the process's background refreshes
(:mod:`slimcache.core.background`). :func:`refreshed` runs it there: under the thread's lease
like any request, except that it never waits for a lease another worker holds (that worker is
doing the work), and whatever goes wrong is counted and logged, never raised into a request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from slimcache._exceptions import StoreError, SummarizerError
from slimcache.core import recorder as reporting
from slimcache.core.background import refreshes
from slimcache.core.plan import Decision, ExtendCached, History, SummarizeAnew, answer_state
from slimcache.core.request import Work
from slimcache.core.results import CompressionResult, Stats
from slimcache.core.settings.compressor import Derived
from slimcache.messages import CheckedMessages
from slimcache.stores.entries import RangeRef, SummaryEntry
from slimcache.stores.keys import ThreadKeys

__all__ = ["answered_now", "offer_refresh", "refreshed", "stale_answer"]

logger = logging.getLogger("slimcache")


def answered_now(
    derived: Derived, history: History, decision: Decision, force: bool
) -> tuple[SummaryEntry | None, RangeRef] | None:
    """Whether a request is answered at once, its summary extended in the background:
    ``refresh="background"``, a summary due, and the answer within the ceiling.

    Returns:
        The summary to serve (``None``: none yet) and the range due, or ``None`` when the
        request waits for its summary.
    """
    ceiling = derived.ceiling
    if ceiling is None or force or not isinstance(decision, (ExtendCached, SummarizeAnew)):
        return None
    base = decision.base if isinstance(decision, ExtendCached) else None
    if ceiling.reason(answer_state(history, base, derived.rules)) is not None:
        return None
    return base, decision.target


def offer_refresh(
    store: object,
    work: Work,
    keys: ThreadKeys,
    refresh: Callable[[CheckedMessages, str | None, ThreadKeys], Coroutine[Any, Any, bool]],
) -> None:
    """Offer the refresh of ``work``'s thread (``refresh(messages, thread_id, keys)``) to the
    process's background refreshes, counting what became of it."""
    # The messages as the request gave them: its caller may append to its list meanwhile.
    checked = dataclasses.replace(work.checked, messages=list(work.checked.messages))
    make = functools.partial(refresh, checked, work.thread_id, keys)
    # One per thread and store in this process; the store lives while one runs (it holds it).
    offered = refreshes.offer((id(store), keys.index), make)
    if offered in ("started", "queued"):
        work.stats.background_started += 1
    elif offered == "dropped":
        work.stats.background_dropped += 1
        logger.warning("thread %s: the background refreshes are full; dropped", keys.encoded)
    if reporting.recorder is not None and offered in ("started", "queued", "dropped"):
        reporting.recorder.refresh("dropped" if offered == "dropped" else "started")


async def stale_answer(
    derived: Derived, work: Work, base: SummaryEntry | None, target: RangeRef
) -> CompressionResult:
    """The answer to a request whose summary is extended in the background: the pinned
    messages, ``base``'s summary (none without one) and every message after it.

    Args:
        derived: The compressor's settings, derived.
        work: The request.
        base: The summary the store has for this history, or ``None``.
        target: The range the trigger asked to summarize: the answer lags behind it.
    """
    covered = base.end if base is not None else work.checked.pinned - 1
    lag = target.end - covered
    work.stats.served_stale(lag)
    if reporting.recorder is not None:
        reporting.recorder.stale_served(lag)
    # What a compressor that re-summarizes on every request would have sent for this one.
    work.naive_tokens = derived.prompt_tokens + sum(
        work.checked.tokens[target.start : target.end + 1]
    )
    work.stats.naive_input_tokens += work.naive_tokens
    if base is None:
        given = work.as_given("stale")
        return dataclasses.replace(given, stale_messages=lag, naive_tokens=work.naive_tokens)
    messages = work.around(derived.summary_message(base.summary, base.start, base.end), base.end)
    if derived.hooks["on_cache_hit"] is not None:
        event = work.event("stale", base.start, base.end, derived.count(base.summary))
        await derived.emit("on_cache_hit", event)
    result = work.result(messages, "stale", base.summary, base.start, base.end, cached=True)
    return dataclasses.replace(result, stale_messages=lag)


async def refreshed(
    derived: Derived,
    work: Work,
    extend: Callable[[], Awaitable[CompressionResult | None]],
    into: Callable[[], Stats],
) -> CompressionResult | None:
    """Run one background refresh, counting it in ``work.stats`` and then in ``into()``.

    Args:
        derived: The compressor's settings, derived.
        work: The refresh, with a :class:`Stats` of its own.
        extend: Does the work: the result, or ``None`` when another worker holds the lease.
        into: The compressor's counters now (``reset_stats`` may have replaced them), which
            receive what the refresh spent once it ends.

    Returns:
        What the refresh made, or ``None`` when it made nothing: another worker was making it,
        or it failed (counted in ``background_failed``, logged, and given to ``on_error``; the
        cache is as it was).

    Raises:
        asyncio.CancelledError: It was cancelled (counted in ``background_cancelled``).
    """
    settings, spent = derived.settings, work.stats
    how = "failed"
    result: CompressionResult | None = None
    try:
        result = await extend()
        if result is not None and not result.cached:  # the store failed under "bypass"
            logger.warning("thread %s: the background refresh was not cached", work.thread_id)
            result = None
        else:
            how = "finished"
    except (SummarizerError, StoreError) as exc:
        lenient = (
            settings.on_summarizer_error == "uncompressed"
            if isinstance(exc, SummarizerError)
            else settings.on_store_error == "bypass"
        )
        if isinstance(exc, SummarizerError):
            spent.summarizer_errors += 1
        logger.log(
            logging.WARNING if lenient else logging.ERROR,
            "thread %s: the background refresh failed; the cache is as it was: %s",
            work.thread_id,
            exc,
        )
        await derived.emit("on_error", exc, [dict(m) for m in work.checked.messages])
    except asyncio.CancelledError:
        how = "cancelled"
        logger.info("thread %s: the background refresh was cancelled", work.thread_id)
        raise
    finally:
        setattr(spent, f"background_{how}", getattr(spent, f"background_{how}") + 1)
        into().absorb(spent)
        if reporting.recorder is not None:
            reporting.recorder.refresh(how)
    return result
