"""The benchmark's summarizers: the offline one and the meter around any summarizer.

The real models' summarizers are ``slimcache.llm``'s, built by the command line: see
``tests/cli/test_summarizers.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from slimcache import Message, SummaryContext, approx_tokens
from slimcache.bench.summarizers import MeteredSummarizer, OfflineSummarizer
from slimcache.messages import count_message_tokens


def context(previous: str | None = None, max_tokens: int = 60) -> SummaryContext:
    if previous is None:
        return SummaryContext("summarize", None, max_tokens, "prompt", "t", 1, 2)
    return SummaryContext("extend", previous, max_tokens, "prompt", "t", 1, 2)


def test_offline_summarizer_is_extractive_and_capped() -> None:
    summarize = OfflineSummarizer()
    messages = [
        {"role": "user", "content": "Book a table for two. At eight, please!"},
        {"role": "assistant", "content": "Done?  Anything else"},
    ]
    first = summarize(messages, context())
    assert first == "- user: Book a table for two.\n- assistant: Done?"
    assert summarize(messages, context()) == first
    extended = summarize([{"role": "user", "content": "No."}], context(first))
    assert extended == first + "\n- user: No."
    many = [{"role": "user", "content": f"Sentence number {i} is here."} for i in range(200)]
    capped = summarize(many, context(max_tokens=50))
    assert approx_tokens(capped) <= 50
    assert capped.endswith("Sentence number 199 is here.")


async def test_metered_summarizer_counts_times_and_passes_the_context_through() -> None:
    seen: list[SummaryContext] = []

    async def inner(messages: Sequence[Message], context: SummaryContext) -> str:
        seen.append(context)
        return "summary"

    class Named:
        name = "named"

        def __call__(self, messages: Sequence[Message], context: SummaryContext) -> object:
            return inner(messages, context)

    metered = MeteredSummarizer(Named())  # type: ignore[arg-type]
    messages = [{"role": "user", "content": "one two three"}, {"role": "assistant", "content": "x"}]
    ctx = context()
    assert await metered(messages, ctx) == "summary"
    assert await metered(messages[:1], ctx) == "summary"
    assert seen == [ctx, ctx]
    assert seen[0] is ctx  # the same context, so what the summarizer reports reaches the stats
    assert metered.message_tokens == 2 * count_message_tokens(messages[0]) + count_message_tokens(
        messages[1]
    )
    assert len(metered.call_seconds) == 2
    assert all(seconds >= 0 for seconds in metered.call_seconds)
