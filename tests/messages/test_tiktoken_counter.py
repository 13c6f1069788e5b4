"""TiktokenCounter: counting with tiktoken's own byte-pair encoder, offline and by name."""

from __future__ import annotations

import sys

import pytest
import tiktoken

from slimcache import (
    ConfigurationError,
    KeepMessages,
    MissingExtraError,
    SummarizeCompressor,
    TokenThreshold,
)
from slimcache.messages import TiktokenCounter
from tests.fakes import RecordingSummarizer


def small_encoding() -> tiktoken.Encoding:
    """A real tiktoken encoding with a tiny vocabulary: every byte, then three merges."""
    ranks = {bytes([byte]): byte for byte in range(256)}
    ranks.update({b"he": 256, b"ll": 257, b"hell": 258})
    return tiktoken.Encoding(
        name="small", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={}
    )


def test_counts_with_the_encodings_merges() -> None:
    count = TiktokenCounter(small_encoding())
    assert count("hello") == 2  # "hell" + "o"
    assert count("hello hello") == 5  # and " " between them
    assert count("xyz") == 3  # no merge: a token per byte
    assert count("") == 0
    assert count("<|endoftext|>") == len("<|endoftext|>")  # special tokens count as text
    assert repr(count) == "TiktokenCounter('small')"


async def test_a_compressor_budgets_with_it() -> None:
    # 9 messages of "hello" count 2 tokens each by the encoding (approx_tokens: 2 too), 4 of
    # "xyzxyzxyz" count 9 each (approx_tokens: 3): over a 50-token trigger only by the encoding.
    history = [
        {"role": ("user", "assistant")[i % 2], "content": "hello" if i < 9 else "xyzxyzxyz"}
        for i in range(13)
    ]
    summarizer = RecordingSummarizer()
    compressor = SummarizeCompressor(
        summarizer,
        trigger=TokenThreshold(100),
        keep=KeepMessages(4),
        token_counter=TiktokenCounter(small_encoding()),
        message_overhead=0,
    )
    assert await compressor.compress(history, thread_id="t") == history  # 54 tokens
    compressor = SummarizeCompressor(
        summarizer,
        trigger=TokenThreshold(50),
        keep=KeepMessages(4),
        token_counter=TiktokenCounter(small_encoding()),
        message_overhead=0,
    )
    compressed = await compressor.compress(history, thread_id="t")
    assert len(summarizer.calls) == 1
    assert compressed[-4:] == history[-4:]


def test_a_named_encoding_loads_or_says_why() -> None:
    loaded: TiktokenCounter | ConfigurationError
    try:
        loaded = TiktokenCounter("o200k_base")
    except ConfigurationError as exc:
        loaded = exc
    if isinstance(loaded, ConfigurationError):
        # tiktoken downloads its encodings at first use; a machine without a network has none.
        assert "could not load the 'o200k_base' encoding" in str(loaded)
        assert "TIKTOKEN_CACHE_DIR" in str(loaded)
        pytest.skip(f"o200k_base cannot be loaded here (no network, no cached copy): {loaded}")
    count = loaded
    assert count("hello world") == 2
    assert TiktokenCounter(model="gpt-4o-mini").encoding is count.encoding


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"encoding": "no-such-encoding"}, "Unknown encoding no-such-encoding"),
        ({"model": "no-such-model"}, "no encoding for model 'no-such-model'"),
        ({"model": ""}, "model must be a model name"),
        ({"encoding": 42}, "encoding must be an encoding name or a tiktoken.Encoding"),
        ({"encoding": ""}, "encoding must be an encoding name or a tiktoken.Encoding"),
    ],
)
def test_what_tiktoken_does_not_know_is_a_configuration_error(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TiktokenCounter(**arguments)  # type: ignore[arg-type]


def test_without_tiktoken_it_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # as if not installed
    with pytest.raises(MissingExtraError, match="TiktokenCounter needs tiktoken: pip install"):
        TiktokenCounter()
