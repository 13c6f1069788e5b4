"""A token counter on tiktoken, OpenAI's tokenizer: the ``tiktoken`` extra."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from slimcache._exceptions import ConfigurationError, MissingExtraError
from slimcache._install import pip_install

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = ["DEFAULT_ENCODING", "TiktokenCounter"]

DEFAULT_ENCODING = "o200k_base"
"""The encoding of OpenAI's current models (GPT-4o, GPT-4.1, o-series, GPT-5)."""


class TiktokenCounter:
    """Counts a text's tokens with a tiktoken encoding; pass it as ``token_counter=``.

    The encoding is loaded when the counter is made, so a problem shows at start-up rather than
    in a request. tiktoken downloads an encoding's file the first time it is asked for and
    caches it in the folder ``TIKTOKEN_CACHE_DIR`` names (else a temporary one): for machines
    without a network, make one counter where there is one, with ``TIKTOKEN_CACHE_DIR`` set,
    and ship that folder; or pass an ``Encoding`` you built. Special tokens in a text
    (``<|endoftext|>``) are counted as the plain text they are.

    Args:
        encoding: An encoding name (``"o200k_base"``, ``"cl100k_base"``, ...) or a
            ``tiktoken.Encoding``.
        model: A model name to take the encoding of (``"gpt-4o-mini"``), instead of
            ``encoding``.

    Raises:
        MissingExtraError: tiktoken is not installed (the ``tiktoken`` extra).
        ConfigurationError: The encoding or model is unknown to tiktoken, or its encoding file
            could not be loaded (no network and no cached copy).

    Example::

        from slimcache import SummarizeCompressor
        from slimcache.messages import TiktokenCounter

        compressor = SummarizeCompressor(summarize, store, token_counter=TiktokenCounter())
    """

    def __init__(self, encoding: str | Encoding = DEFAULT_ENCODING, *, model: str | None = None):
        try:
            import tiktoken
        except ImportError:
            raise MissingExtraError(
                f"TiktokenCounter needs tiktoken: {pip_install('tiktoken')}"
            ) from None
        if model is not None:
            if not isinstance(model, str) or not model:
                raise ConfigurationError(f"model must be a model name, got {model!r}")
            try:
                name = tiktoken.encoding_name_for_model(model)
            except KeyError:
                raise ConfigurationError(
                    f"tiktoken knows no encoding for model {model!r}; pass encoding= instead"
                ) from None
        elif isinstance(encoding, tiktoken.Encoding):
            self.encoding = encoding
            self._encode = encoding.encode_ordinary
            return
        elif isinstance(encoding, str) and encoding:
            name = encoding
        else:
            raise ConfigurationError(
                f"encoding must be an encoding name or a tiktoken.Encoding, got {encoding!r}"
            )
        self.encoding = _load(tiktoken.get_encoding, name)
        self._encode = self.encoding.encode_ordinary

    def __call__(self, text: str) -> int:
        """The number of tokens of ``text``."""
        return len(self._encode(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding.name!r})"


def _load(get_encoding: Callable[[str], Encoding], name: str) -> Encoding:
    """The encoding ``name``, or a :class:`ConfigurationError` saying why it could not load."""
    try:
        encoding = get_encoding(name)
    except ValueError as exc:  # an unknown name
        raise ConfigurationError(f"tiktoken: {exc}") from None
    except Exception as exc:  # the download: no network, a proxy, a broken cached file
        raise ConfigurationError(
            f"tiktoken could not load the {name!r} encoding ({type(exc).__name__}: {exc}); "
            "it downloads an encoding's file at first use and caches it where TIKTOKEN_CACHE_DIR "
            "says: without a network, ship a folder filled where there is one, or pass a "
            "tiktoken.Encoding"
        ) from exc
    return encoding
