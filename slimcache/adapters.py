"""The adapter-author toolkit, under its former name: import it from :mod:`slimcache.stores`."""

from slimcache.stores.toolkit import (
    DEFAULT_STORE_TIMEOUT,
    BoundedStore,
    CallBoundedStore,
    ClosingStore,
    check_ops,
    check_seconds,
    combine_options,
    decode_value,
    positive_int,
    run_bounded,
    run_op,
    store_error,
    translate_errors,
    validate_ttl,
)

__all__ = [
    "DEFAULT_STORE_TIMEOUT",
    "BoundedStore",
    "CallBoundedStore",
    "ClosingStore",
    "check_ops",
    "check_seconds",
    "combine_options",
    "decode_value",
    "positive_int",
    "run_bounded",
    "run_op",
    "store_error",
    "translate_errors",
    "validate_ttl",
]
