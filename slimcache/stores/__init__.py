"""Stores: the face of slimcache for people who write or pick a store.

- the :class:`Store` protocol and its optional abilities (``Supports*``) and batch operations;
- :class:`MemoryStore`, the embedded default and the reference implementation;
- the adapter-author toolkit: bounded, error-translating calls and option helpers, and
  :func:`pip_install`, the install command to name in a missing driver's error;
- what the boto3-based stores share (:mod:`slimcache.stores.boto`): the client options they
  check and the client they build;
- :func:`open_store`, which picks a store by URL through the ``slimcache.stores`` entry points;
- what slimcache keeps in a store, to inspect it: the keys (:class:`ThreadKeys`,
  :func:`encode_thread_id`) and the entries (:class:`SummaryEntry`, :class:`ThreadIndex`,
  :class:`RangeRef`).
"""

from slimcache._install import pip_install
from slimcache._public import publish as _publish
from slimcache.stores.boto import (
    BOTO_CLIENT_OPTIONS,
    BOTO_URL_OPTIONS,
    DEFAULT_MAX_POOL_CONNECTIONS,
    boto_client_config,
    boto_client_kwargs,
    check_boto_options,
    check_endpoint_url,
    check_region_name,
    endpoint_of,
    make_boto_client,
    pool_size,
    query_options,
    split_store_url,
)
from slimcache.stores.entries import RangeRef, SummaryEntry, ThreadIndex
from slimcache.stores.keys import ThreadKeys, encode_thread_id
from slimcache.stores.memory import MemoryStore
from slimcache.stores.protocol import (
    CompareAndDeleteOp,
    CompareAndSetOp,
    DatabaseTarget,
    DeleteOp,
    GetOp,
    SetIfAbsentOp,
    SetOp,
    Store,
    StoreOp,
    SupportsBatch,
    SupportsCallTimeout,
    SupportsClose,
    SupportsCompareAndSet,
    SupportsDatabaseTarget,
    SupportsGetMany,
    SupportsOwnExpiry,
    SupportsScanKeys,
    SupportsSetIfAbsent,
    call_bound,
    expires_by_itself,
)
from slimcache.stores.registry import ENTRY_POINT_GROUP, open_store, store_schemes
from slimcache.stores.toolkit import (
    DEFAULT_STORE_TIMEOUT,
    BoundedStore,
    CallBoundedStore,
    ClosingStore,
    check_count,
    check_ops,
    check_seconds,
    combine_options,
    decode_value,
    driver_timeout,
    positive_int,
    redact_url,
    reject_unknown_options,
    run_bounded,
    run_op,
    store_error,
    translate_errors,
    validate_ttl,
)

__all__ = [
    "BOTO_CLIENT_OPTIONS",
    "BOTO_URL_OPTIONS",
    "DEFAULT_MAX_POOL_CONNECTIONS",
    "DEFAULT_STORE_TIMEOUT",
    "ENTRY_POINT_GROUP",
    "BoundedStore",
    "CallBoundedStore",
    "ClosingStore",
    "CompareAndDeleteOp",
    "CompareAndSetOp",
    "DatabaseTarget",
    "DeleteOp",
    "GetOp",
    "MemoryStore",
    "RangeRef",
    "SetIfAbsentOp",
    "SetOp",
    "Store",
    "StoreOp",
    "SummaryEntry",
    "SupportsBatch",
    "SupportsCallTimeout",
    "SupportsClose",
    "SupportsCompareAndSet",
    "SupportsDatabaseTarget",
    "SupportsGetMany",
    "SupportsOwnExpiry",
    "SupportsScanKeys",
    "SupportsSetIfAbsent",
    "ThreadIndex",
    "ThreadKeys",
    "boto_client_config",
    "boto_client_kwargs",
    "call_bound",
    "check_boto_options",
    "check_count",
    "check_endpoint_url",
    "check_ops",
    "check_region_name",
    "check_seconds",
    "combine_options",
    "decode_value",
    "driver_timeout",
    "encode_thread_id",
    "endpoint_of",
    "expires_by_itself",
    "make_boto_client",
    "open_store",
    "pip_install",
    "pool_size",
    "positive_int",
    "query_options",
    "redact_url",
    "reject_unknown_options",
    "run_bounded",
    "run_op",
    "split_store_url",
    "store_error",
    "store_schemes",
    "translate_errors",
    "validate_ttl",
]

_publish(__name__, globals(), __all__)
