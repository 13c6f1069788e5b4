"""The summarizer interface: what your function receives, the default prompts, and the call."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Union

from slimcache._exceptions import InputTooLong, SummarizerError
from slimcache.core.input_ratio import length_refusal
from slimcache.messages import Message, TokenCounter, count_message_tokens, render_transcript

__all__ = [
    "BUDGET_SLACK",
    "DEFAULT_CONDENSE_PROMPT",
    "DEFAULT_EXTEND_PROMPT",
    "DEFAULT_SUMMARIZE_PROMPT",
    "MESSAGES_PLACEHOLDER",
    "Kept",
    "OnOverBudget",
    "Prompts",
    "Summarizer",
    "SummarizerReport",
    "SummaryContext",
    "call_summarizer",
    "cut_to_budget",
    "input_tokens",
    "keep_within_budget",
    "run_summarizer",
    "summarizer_name",
]

logger = logging.getLogger("slimcache")

# Sync summarizers run on their own bounded pool, apart from asyncio's default executor (which
# store drivers use): a summarizer that hangs past its timeout ties up one of these threads,
# never the store's I/O.
SUMMARIZER_THREADS = 8
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _summarizer_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=SUMMARIZER_THREADS, thread_name_prefix="slimcache-summarizer"
            )
        return _executor


Task = Literal["summarize", "extend", "condense"]
"""What a summarizer call is for (``context.task``): ``summarize`` messages from scratch,
``extend`` a previous summary with newer messages, ``condense`` a summary grown past its budget."""

_FACTS = (
    "Then, under 'Facts:', list verbatim every concrete value that still matters (names, "
    "numbers, dates, codes, identifiers, paths), never a label in place of a value."
)
DEFAULT_SUMMARIZE_PROMPT = (
    "You compress chat history. Summarize the conversation below so that an assistant can "
    "continue it without the original messages. Keep decisions, open questions, the user's "
    "preferences and any tool results that still matter. Write in the third person, plain "
    f"prose or short bullet points. {_FACTS} At most {{max_tokens}} tokens in all."
)
DEFAULT_EXTEND_PROMPT = (
    "You compress chat history. Below is the summary of the conversation so far, followed by "
    "newer messages. Rewrite the summary so that it also covers the newer messages. Keep "
    "every fact of the summary so far unless a newer message contradicts it (then the newer "
    "message wins), and add the newer messages' names, numbers, decisions, open questions, "
    "preferences and tool results that still matter. "
    f"{_FACTS} At most {{max_tokens}} tokens in all."
)
DEFAULT_CONDENSE_PROMPT = (
    "The text below is a summary of a conversation, assembled from several partial summaries. "
    "Condense it into one coherent summary, keeping decisions, open questions and the user's "
    f"preferences; the later part wins where they disagree. {_FACTS} At most {{max_tokens}} "
    "tokens in all."
)
_EARLIER_DEFAULTS = {
    # The default prompts before the 'Facts:' section: entries made with them are still served.
    DEFAULT_SUMMARIZE_PROMPT: (
        "You compress chat history. Summarize the conversation below so that an assistant can "
        "continue it without the original messages. Keep names, numbers, decisions, open "
        "questions, the user's preferences and any tool results that still matter. Write in "
        "the third person, plain prose or short bullet points, at most {max_tokens} tokens."
    ),
    DEFAULT_EXTEND_PROMPT: (
        "You compress chat history. Below is the summary of the conversation so far, followed "
        "by newer messages. Rewrite the summary so that it also covers the newer messages. Keep "
        "names, numbers, decisions, open questions, the user's preferences and any tool results "
        "that still matter; when newer messages contradict the summary, the newer messages "
        "win. At most {max_tokens} tokens."
    ),
    DEFAULT_CONDENSE_PROMPT: (
        "The text below is a summary of a conversation, assembled from several partial "
        "summaries. Condense it into one coherent summary of at most {max_tokens} tokens, "
        "keeping names, numbers, decisions, open questions and the user's preferences."
    ),
}


@dataclass(frozen=True)
class Prompts:
    """The prompts handed to the summarizer; ``{max_tokens}`` is filled in.

    Attributes:
        summarize: For summarizing messages from scratch.
        extend: For folding new messages into a previous summary.
        condense: For shortening a summary that grew past its budget (``hybrid`` strategy).
    """

    summarize: str = DEFAULT_SUMMARIZE_PROMPT
    extend: str = DEFAULT_EXTEND_PROMPT
    condense: str = DEFAULT_CONDENSE_PROMPT

    def for_task(self, task: Task) -> str:
        """Return the prompt template for ``task``."""
        prompt: str = getattr(self, task)
        return prompt

    def render(self, task: Task, max_tokens: int, emphasis: str | None = None) -> str:
        """The prompt for ``task`` with the budget filled in, and ``emphasis`` (one more
        sentence, as a strategy asks) after it."""
        prompt = self.for_task(task).replace("{max_tokens}", str(max_tokens))
        return prompt if emphasis is None else f"{prompt} {emphasis}"

    @property
    def digest(self) -> str:
        """A short digest identifying these prompts in cached entries."""
        return _digest((self.summarize, self.extend, self.condense))

    @property
    def digests_also(self) -> frozenset[str]:
        """Digests of earlier prompts taken as these: each of today's default prompts they
        hold replaced by the default it replaced, so that entries made with the earlier
        defaults are still served (``reuse_entries="matching"``) and extended."""
        texts = (self.summarize, self.extend, self.condense)
        summarize, extend, condense = (_EARLIER_DEFAULTS.get(text, text) for text in texts)
        earlier = (summarize, extend, condense)
        return frozenset() if earlier == texts else frozenset({_digest(earlier)})


def _digest(texts: tuple[str, str, str]) -> str:
    return hashlib.blake2b("\x00".join(texts).encode(), digest_size=6).hexdigest()


@dataclass
class SummarizerReport:
    """What a summarizer tells the compressor about one call, besides the summary it returns.

    The compressor hands a fresh report to every call, in ``SummaryContext.report``, and
    adds it to its :class:`~slimcache.Stats` when the call ends, whether it returned or raised.
    The summarizers of :mod:`slimcache.llm` and :mod:`slimcache.langchain` fill it in; one of
    your own may too (``context.report.truncated_replies += 1``).

    Attributes:
        truncated_replies: Replies the model cut at the token budget (``finish_reason="length"``,
            ``stop_reason="max_tokens"``).
        shorter_retries: Requests made again, asking for a shorter summary, after a cut reply.
        truncated_accepted: Summaries returned although cut (``on_truncated="accept"``).
        input_tokens: The input tokens the provider reported using for the call (its usage,
            every request of the call added up), or ``None`` when the summarizer does not have
            them. slimcache's telemetry reports them as ``gen_ai.client.token.usage``.
        output_tokens: The output tokens it reported, likewise.
        input_reports: Requests whose input tokens the provider reported (those
            ``input_tokens`` adds up). The compressor learns from them how many tokens the
            provider counts per token it estimates (see :mod:`slimcache.core.input_ratio`).
        requests: Requests the summarizer sent to its model for this call, retries included
            (0: it does not count them, and the call counts as one request).
    """

    truncated_replies: int = 0
    shorter_retries: int = 0
    truncated_accepted: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int = 0
    input_reports: int = 0

    def add_usage(self, input_tokens: int | None, output_tokens: int | None) -> None:
        """Count the usage the provider reported for one request (``None``: not reported)."""
        if input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + input_tokens
            self.input_reports += 1
        if output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + output_tokens


MESSAGES_PLACEHOLDER = "{messages}"
"""Where a prompt that holds it gets the previous summary and the transcript."""


@dataclass(frozen=True)
class SummaryContext:
    """Everything a summarizer needs besides the messages.

    Attributes:
        task: ``"summarize"`` (from scratch), ``"extend"`` (fold the messages into
            ``previous_summary``) or ``"condense"`` (shorten ``previous_summary``; no messages).
        previous_summary: The summary to extend or condense, else ``None``.
        max_tokens: Token budget for the summary.
        prompt: The default prompt for this task, budget filled in.
        thread_id: The conversation's thread id, if any.
        start: Index of the first message given, in the whole conversation.
        end: Index of the last message given (``start - 1`` when none are given).
        report: Where the summarizer reports what happened besides the summary (replies cut
            by the budget, retries); the compressor counts it in its stats.
    """

    task: Task
    previous_summary: str | None
    max_tokens: int
    prompt: str
    thread_id: str | None
    start: int
    end: int
    report: SummarizerReport = field(default_factory=SummarizerReport, compare=False, repr=False)

    def to_prompt(self, messages: Sequence[Message]) -> str:
        """Render the whole request as one text: prompt, previous summary, transcript.

        A prompt that holds ``{messages}`` (as LangChain's summary prompts do) gets the previous
        summary and the transcript in its place; any other is followed by them.
        """
        body = self._body(messages)
        if MESSAGES_PLACEHOLDER in self.prompt:
            return self.prompt.replace(MESSAGES_PLACEHOLDER, body or "(nothing to summarize)")
        return f"{self.prompt}\n\n{body}" if body else self.prompt

    def to_chat(self, messages: Sequence[Message]) -> list[dict[str, str]]:
        """Render the request as chat messages for a chat-completions API: the prompt as the
        system message and the rest as the user's, or, for a prompt that holds ``{messages}``,
        the whole request as one user message (as LangChain sends its summary prompt)."""
        if MESSAGES_PLACEHOLDER in self.prompt:
            return [{"role": "user", "content": self.to_prompt(messages)}]
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": self._body(messages) or "(nothing to summarize)"},
        ]

    def _body(self, messages: Sequence[Message]) -> str:
        """The previous summary and the transcript, as the prompt is followed by them."""
        parts = []
        if self.previous_summary is not None:
            parts.append(f"Summary so far:\n{self.previous_summary}")
        if messages:
            parts.append(f"Messages:\n{render_transcript(messages)}")
        return "\n\n".join(parts)


Summarizer = Callable[
    [Sequence[Message], SummaryContext], Union[Awaitable[str], str]  # noqa: UP007
]
"""Your summarizer: ``(messages, context) -> str``, async or sync (sync runs on a bounded pool of
``SUMMARIZER_THREADS`` threads of its own)."""


def summarizer_name(summarizer: object) -> str:
    """A readable identity for a summarizer, recorded in cached entries."""
    name = getattr(summarizer, "__qualname__", None) or type(summarizer).__qualname__
    module = getattr(summarizer, "__module__", None) or type(summarizer).__module__
    return f"{module}.{name}"


def _is_async(func: object) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - async __call__ on an instance
    return inspect.iscoroutinefunction(call)


def run_summarizer(
    summarizer: Summarizer, messages: Sequence[Message], context: SummaryContext
) -> Awaitable[Any]:
    """Start the summarizer: an async one in this loop, a sync one on the summarizer pool.

    The result is awaited as it comes (an awaitable a sync summarizer hands back is followed);
    nothing is checked here: :func:`call_summarizer` does that.
    """
    if _is_async(summarizer):
        return _resolve(summarizer(messages, context))
    call = functools.partial(contextvars.copy_context().run, summarizer, messages, context)
    return _resolve(asyncio.get_running_loop().run_in_executor(_summarizer_executor(), call))


async def call_summarizer(
    summarizer: Summarizer,
    messages: Sequence[Message],
    context: SummaryContext,
    *,
    timeout: float | None,
) -> str:
    """Call the summarizer and check what it returns.

    Raises:
        InputTooLong: The model refused the request for its length (see
            :func:`~slimcache.core.input_ratio.length_refusal`); the client's error is chained.
        SummarizerError: It raised, timed out, or returned an empty or non-string result;
            the original exception is chained.
    """
    where = f"messages {context.start}-{context.end}" if messages else "the summary"
    try:
        pending = run_summarizer(summarizer, messages, context)
        if timeout is not None:
            result = await asyncio.wait_for(pending, timeout)
        else:
            result = await pending
    except asyncio.TimeoutError as exc:
        raise SummarizerError(
            f"summarizer timed out after {timeout}s on {where} ({context.task})"
        ) from exc
    except Exception as exc:
        refusal = length_refusal(exc)
        if refusal is not None:
            raise InputTooLong(
                f"summarizer refused {where} ({context.task}) for its length: "
                f"{type(exc).__name__}: {exc}",
                prompt_tokens=refusal.prompt_tokens,
                context_tokens=refusal.context_tokens,
            ) from exc
        raise SummarizerError(
            f"summarizer failed on {where} ({context.task}): {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(result, str):
        raise SummarizerError(
            f"summarizer returned {type(result).__name__} for {where}, expected a string"
        )
    if not result.strip():
        raise SummarizerError(f"summarizer returned an empty summary for {where}")
    return result.strip()


async def _resolve(value: Any) -> Any:
    # A sync summarizer may still hand back an awaitable; follow it through.
    while inspect.isawaitable(value):
        value = await value
    return value


BUDGET_SLACK = 1.25
"""How far past ``max_summary_tokens`` a summary may come back, counted with the front door's
token counter, before it counts as over the budget: room for a model whose tokenizer counts
the same text differently."""


OnOverBudget = Literal["cut", "raise"]
"""What a summary still over its budget after the condense call becomes: ``"cut"`` to the
budget at a sentence or word boundary (counted and logged), or ``"raise"``
:class:`~slimcache.SummarizerError`."""


class Kept(NamedTuple):
    """What :func:`keep_within_budget` made of a summary.

    Attributes:
        summary: The summary to keep.
        condensed: Whether it came back over the budget and one more call condensed it.
        cut: Whether the condensed summary was still over the budget and was cut to it.
    """

    summary: str
    condensed: bool
    cut: bool


# Where a sentence ends: after ., ! or ? followed by a space or the end, or at a line break.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_WORD_END = re.compile(r"\S(?=\s)")


def _longest_fitting(
    text: str, ends: Sequence[int], budget: int, count: Callable[[str], int]
) -> int | None:
    """The largest of ``ends`` (ascending) whose prefix of ``text`` fits ``budget``, if any.

    A prefix counts no more than a longer one, so the search halves the candidates.
    """
    low, high, best = 0, len(ends) - 1, None
    while low <= high:
        middle = (low + high) // 2
        if count(text[: ends[middle]].rstrip()) <= budget:
            best, low = ends[middle], middle + 1
        else:
            high = middle - 1
    return best


def cut_to_budget(text: str, budget: int, count: Callable[[str], int]) -> str:
    """``text`` cut to at most ``budget`` tokens (as ``count`` counts them) at a boundary.

    The cut falls after the last whole sentence that fits, unless that keeps less than half
    the budget: then after the last whole word that fits. A first word longer than the budget
    is cut where the budget ends.
    """
    text = text.strip()
    if count(text) <= budget:
        return text
    sentence = _longest_fitting(
        text, [m.end() for m in _SENTENCE_END.finditer(text)], budget, count
    )
    if sentence is not None and 2 * count(text[:sentence].rstrip()) >= budget:
        return text[:sentence].rstrip()
    word = _longest_fitting(text, [m.end() for m in _WORD_END.finditer(text)], budget, count)
    if word is not None:
        return text[:word].rstrip()
    characters = _longest_fitting(text, range(1, len(text) + 1), budget, count)
    return text[: characters or 1]


async def keep_within_budget(
    summary: str,
    budget: int,
    count: Callable[[str], int],
    condense: Callable[[str], Awaitable[str]],
    *,
    on_over_budget: OnOverBudget,
) -> Kept:
    """Hold a summary to its budget: one call to ``condense`` it when it came back over.

    A summary that is over the budget (by more than :data:`BUDGET_SLACK`) is condensed by one
    call; if the condensed one is over it too, it is cut to the budget at a sentence or word
    boundary (:func:`cut_to_budget`) and a warning logged, or, with ``on_over_budget="raise"``,
    refused.

    Returns:
        The summary to keep, and whether it was condensed and cut.

    Raises:
        SummarizerError: The condensed summary is over the budget too, under
            ``on_over_budget="raise"``; nothing is to be kept.
    """
    limit = budget * BUDGET_SLACK
    tokens = count(summary)
    if tokens <= limit:
        return Kept(summary, condensed=False, cut=False)
    condensed = await condense(summary)
    again = count(condensed)
    if again <= limit:
        return Kept(condensed, condensed=True, cut=False)
    what = (
        f"the summarizer returned {tokens} tokens against a budget of {budget} "
        f"(max_summary_tokens), and {again} when asked to condense it"
    )
    if on_over_budget == "raise":
        raise SummarizerError(f"{what}; pass on_over_budget='cut' to keep it cut to the budget")
    kept = cut_to_budget(condensed, budget, count)
    logger.warning("%s; kept its first %d tokens (on_over_budget='cut')", what, count(kept))
    return Kept(kept, condensed=True, cut=True)


def input_tokens(
    prompt: str,
    messages: Sequence[Message],
    previous: str | None,
    count: TokenCounter,
    overhead: int,
) -> int:
    """The tokens one summarizer call is sent: its prompt, messages and previous summary."""
    sent = count(prompt) + sum(count_message_tokens(m, count, overhead) for m in messages)
    return sent if previous is None else sent + count(previous)
