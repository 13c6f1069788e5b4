"""The store protocol, its optional abilities, batch operations and shared argument checks."""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union, runtime_checkable

from slimcache._exceptions import ConfigurationError
from slimcache._process import register

__all__ = [
    "Abilities",
    "CompareAndDeleteOp",
    "CompareAndSetOp",
    "DatabaseTarget",
    "DeleteOp",
    "GetOp",
    "SetIfAbsentOp",
    "SetOp",
    "Store",
    "StoreOp",
    "SupportsBatch",
    "SupportsCallTimeout",
    "SupportsClose",
    "SupportsCompareAndSet",
    "SupportsDatabaseTarget",
    "SupportsGetMany",
    "SupportsOwnExpiry",
    "SupportsScanKeys",
    "SupportsSetIfAbsent",
    "abilities",
    "call_bound",
    "check_ops",
    "conforms",
    "expires_by_itself",
    "positive_int",
    "validate_ttl",
]


@runtime_checkable
class Store(Protocol):
    """Where summaries live: any object with these three async methods is a store.

    No subclassing is needed; a user's plain class with ``get``, ``set`` and ``delete`` works.
    """

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or ``None`` if absent or expired."""
        ...

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, replacing any previous value.

        Args:
            key: The key.
            value: The value (a JSON document when written by slimcache).
            ttl: Seconds until the entry expires; ``None`` keeps it until deleted.
        """
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key``; deleting a missing key is not an error."""
        ...


@runtime_checkable
class SupportsSetIfAbsent(Protocol):
    """Optional ability: an atomic write that succeeds only when the key is absent."""

    async def set_if_absent(self, key: str, value: str, *, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` holds nothing (or only an expired entry).

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key already existed.
        """
        ...


@runtime_checkable
class SupportsGetMany(Protocol):
    """Optional ability: read several keys in one round trip."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the values of ``keys`` in the same order, ``None`` for absent keys."""
        ...


@runtime_checkable
class SupportsCompareAndSet(Protocol):
    """Optional ability: writes and deletes that happen only if the key holds a given value.

    slimcache uses it to release only the lease it owns, to renew that lease, and to write a
    thread's index without overwriting a newer index another worker wrote in between.
    """

    async def compare_and_set(
        self, key: str, expected: str | None, value: str, *, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if ``key`` currently holds ``expected``, atomically.

        Args:
            key: The key.
            expected: The value the key must hold; ``None`` means the key must be absent (or
                hold only an expired entry).
            value: The new value.
            ttl: Seconds until the new entry expires; ``None`` keeps it until deleted.

        Returns:
            ``True`` if this call wrote the value, ``False`` if the key held something else.
        """
        ...

    async def compare_and_delete(self, key: str, expected: str) -> bool:
        """Remove ``key`` only if it currently holds ``expected``, atomically.

        Returns:
            ``True`` if this call deleted the entry, ``False`` if the key held something else
            or nothing.
        """
        ...


@dataclass(frozen=True)
class GetOp:
    """Read ``key``: the result is its value, or ``None``."""

    key: str


@dataclass(frozen=True)
class SetOp:
    """Write ``value`` under ``key`` (as :meth:`Store.set`): the result is ``None``."""

    key: str
    value: str
    ttl: float | None = None


@dataclass(frozen=True)
class SetIfAbsentOp:
    """Write only if ``key`` holds nothing (as ``set_if_absent``): the result says if it did."""

    key: str
    value: str
    ttl: float | None = None


@dataclass(frozen=True)
class CompareAndSetOp:
    """Write only if ``key`` holds ``expected`` (as ``compare_and_set``): the result says if it
    did."""

    key: str
    expected: str | None
    value: str
    ttl: float | None = None


@dataclass(frozen=True)
class CompareAndDeleteOp:
    """Delete only if ``key`` holds ``expected`` (as ``compare_and_delete``): the result says if
    it did."""

    key: str
    expected: str


@dataclass(frozen=True)
class DeleteOp:
    """Delete ``key``: the result is ``None``."""

    key: str


StoreOp = Union[GetOp, SetOp, SetIfAbsentOp, CompareAndSetOp, CompareAndDeleteOp, DeleteOp]  # noqa: UP007
"""One operation of a :class:`SupportsBatch` batch."""

_OP_TYPES = (GetOp, SetOp, SetIfAbsentOp, CompareAndSetOp, CompareAndDeleteOp, DeleteOp)


@runtime_checkable
class SupportsBatch(Protocol):
    """Optional ability: several operations in one round trip.

    slimcache uses it to take a thread's lease and read the thread in one round trip, and to
    write a summary, the index and release the lease in another. A store with this ability
    has ``set_if_absent`` and ``compare_and_set`` as well.
    """

    async def batch(self, ops: Sequence[StoreOp]) -> list[Any]:
        """Run ``ops`` in order, in one round trip, each with the meaning of its own method.

        Each operation sees the effects of those before it. The bundled stores run a batch
        atomically (one Redis ``MULTI``/``EXEC``, one SQL transaction, one lock); a store
        that cannot may apply part of a failed batch, as separate calls could.

        Returns:
            One result per operation, in order: a value or ``None`` for :class:`GetOp`, a
            ``bool`` for the conditional ones, ``None`` for :class:`SetOp` and
            :class:`DeleteOp`.

        Raises:
            ConfigurationError: An operation is malformed (checked before anything runs).
            StoreError: The store failed.
        """
        ...


def check_ops(ops: Sequence[StoreOp]) -> list[StoreOp]:
    """Check a batch before anything runs: known operations, string keys and values, valid TTLs.

    Raises:
        ConfigurationError: Naming the position and what is wrong.
    """
    if isinstance(ops, (str, bytes)) or not isinstance(ops, Sequence):
        raise ConfigurationError(f"ops must be a sequence of operations, got {type(ops).__name__}")
    checked = list(ops)
    for position, op in enumerate(checked):
        if not isinstance(op, _OP_TYPES):
            raise ConfigurationError(
                f"ops[{position}] must be a store operation, got {type(op).__name__}"
            )
        texts = {"key": op.key}
        if isinstance(op, (SetOp, SetIfAbsentOp, CompareAndSetOp)):
            texts["value"] = op.value
            validate_ttl(op.ttl)
        if isinstance(op, CompareAndDeleteOp) or (
            isinstance(op, CompareAndSetOp) and op.expected is not None
        ):
            texts["expected"] = op.expected  # type: ignore[assignment]
        for field, text in texts.items():
            if not isinstance(text, str):
                raise ConfigurationError(
                    f"ops[{position}].{field} must be a string, got {type(text).__name__}"
                )
    return checked


@runtime_checkable
class SupportsCallTimeout(Protocol):
    """Optional ability: the store bounds every one of its calls itself.

    Every call returns, or raises :class:`~slimcache.StoreTimeout`, within ``call_timeout``
    seconds, whatever the server does (frozen, unreachable), including a call that makes
    several round trips. A compressor whose ``store_timeout`` is at least that long then awaits
    the store directly, instead of running each call as a task of its own under a timer of
    its own. The Redis and SQL stores have it (their ``timeout``), as does
    :class:`MemoryStore` itself, whose calls never wait.
    """

    @property
    def call_timeout(self) -> float | None:
        """Seconds within which every call returns or raises; ``None`` when not promised."""
        ...


def call_bound(store: object) -> float | None:
    """The bound ``store`` promises on each of its calls (see :class:`SupportsCallTimeout`).

    ``None`` when it promises none, or when what it gives is not a finite number of seconds:
    a store is trusted with its own bound only when it states one plainly.
    """
    try:
        seconds = getattr(store, "call_timeout", None)
    except Exception:  # a broken property is no promise
        return None
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    return float(seconds) if 0 <= seconds < math.inf else None


@runtime_checkable
class SupportsOwnExpiry(Protocol):
    """Optional ability: the store times every TTL by one clock of its own.

    ``expiry_clock`` says whose clock decides that an entry written with a TTL has expired:

    - ``"store"``: one clock of the store's own, whichever client wrote or reads the entry.
      Redis expires keys by their TTL; the SQL store computes and compares expiry times with
      the database's clock inside its statements; :class:`MemoryStore` uses its own clock (a
      subclass inherits the declaration: override it if the subclass times expiry otherwise).
      An entry that is still there is live, whatever any client's clock says.
    - ``"writer"``: the clock of the client that wrote the entry, compared with the reader's
      (the S3 store, whose objects carry their expiry time in their metadata).

    The thread lease relies on it. On a store that times expiry itself, a waiter never takes
    the lease over because of the deadline its value states (read by the holder's clock), so
    no worker's clock error, of any size, makes a live holder lose its lease. A store that
    does not declare it, or declares anything but ``"store"``, counts as ``"writer"``: there a
    lease whose stated deadline lies more than
    :data:`~slimcache.core.lease.CLOCK_TOLERANCE` seconds in a waiter's past is taken over.
    """

    @property
    def expiry_clock(self) -> str:
        """``"store"`` or ``"writer"``: see the class docstring."""
        ...


def expires_by_itself(store: object) -> bool:
    """Whether ``store`` times every TTL by a clock of its own (see :class:`SupportsOwnExpiry`).

    ``False`` when it does not declare it, or declares anything but ``"store"``: a store is
    trusted with its own expiry only when it says so plainly.
    """
    try:
        clock = getattr(store, "expiry_clock", None)
    except Exception:  # a broken property is no declaration
        return False
    return isinstance(clock, str) and clock == "store"


@runtime_checkable
class SupportsClose(Protocol):
    """Optional ability: release connections."""

    async def aclose(self) -> None:
        """Release every resource the store holds; the store is unusable afterwards."""
        ...


@runtime_checkable
class SupportsScanKeys(Protocol):
    """Optional ability: list the keys that start with a prefix, a bounded page at a time.

    ``slimcache threads URL`` lists a store's threads with it. The memory store reads its
    dict, Redis ``SCAN``, the SQL store one ``SELECT`` a page, and S3 lists objects.
    """

    async def scan_keys(
        self, prefix: str, *, cursor: str | None = None, count: int = 100
    ) -> tuple[list[str], str | None]:
        """Some of the keys that start with ``prefix``, and where the next page starts.

        Args:
            prefix: What the keys start with.
            cursor: ``None`` for the first page; then the cursor the previous page returned.
            count: How many keys a page holds, about (Redis's ``SCAN`` takes it as a hint).

        Returns:
            The page's keys, and the cursor of the next page (``None``: there is none). A key
            that stays in the store while the pages are read is listed at least once.
        """
        ...


@dataclass(frozen=True)
class DatabaseTarget:
    """What a store's calls reach, in the words of OpenTelemetry's database conventions.

    :mod:`slimcache.telemetry` reports each store call with these attributes; a store that
    has no :class:`SupportsDatabaseTarget` is reported under its class name.

    Attributes:
        system: ``db.system.name``: ``"redis"``, ``"postgresql"``, ``"sqlite"``, ... (one of
            the conventions' well-known values where one applies).
        address: ``server.address``: the host name, IP address or socket path.
        port: ``server.port``.
        namespace: ``db.namespace``: the database (a PostgreSQL database name, a Redis
            database index, a bucket).
        collection: ``db.collection.name``: the table (or other collection) the entries are in.
    """

    system: str
    address: str | None = None
    port: int | None = None
    namespace: str | None = None
    collection: str | None = None


@runtime_checkable
class SupportsDatabaseTarget(Protocol):
    """Optional ability: the store says which database its calls reach, for telemetry."""

    @property
    def database_target(self) -> DatabaseTarget:
        """The database, server and table this store's calls reach."""
        ...


# Per (type, protocol): the members the type itself lacks (none: every instance conforms).
_MISSING: dict[tuple[type, type], tuple[str, ...]] = register(
    __name__, "abilities", "the members each type lacks of each protocol", {}
)


def _members(protocol: type) -> frozenset[str]:
    found = getattr(protocol, "__protocol_attrs__", None)  # Python 3.12+
    if found is None:
        found = typing._get_protocol_attrs(protocol)  # type: ignore[attr-defined]
    return frozenset(found)


def conforms(obj: object, protocol: type) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol of methods, decided once
    per type of ``obj``.

    A runtime protocol check reads the protocol's members anew on every call (about 6 us on
    Python 3.11), and a compressor built per request makes several. What the type defines is
    looked up once: a type that has every method conforms, whatever the instance; for one that
    lacks some, only the instance's own attributes are read (a store may be given its methods
    as attributes of the instance). A type that computes attributes (``__getattr__``) is
    asked each time, as ``isinstance`` would.
    """
    kind = type(obj)
    missing = _MISSING.get((kind, protocol))
    if missing is None:
        missing = tuple(
            sorted(name for name in _members(protocol) if getattr(kind, name, None) is None)
        )
        _MISSING[(kind, protocol)] = missing
    if not missing:
        return True
    if hasattr(kind, "__getattr__"):
        return isinstance(obj, protocol)
    own = getattr(obj, "__dict__", None)
    return own is not None and all(own.get(name) is not None for name in missing)


@dataclass(frozen=True)
class Abilities:
    """What a store can do, as :func:`conforms` decides it for each protocol.

    Attributes:
        store: It is a :class:`Store` (async ``get``, ``set`` and ``delete``).
        set_if_absent: :class:`SupportsSetIfAbsent`.
        batch: :class:`SupportsBatch`.
        compare_and_set: :class:`SupportsCompareAndSet`.
        get_many: :class:`SupportsGetMany`.
    """

    store: bool
    set_if_absent: bool
    batch: bool
    compare_and_set: bool
    get_many: bool


# Per type of store whose abilities its instances cannot change: what it can do.
_ABILITIES: dict[type, Abilities] = register(
    __name__, "store abilities", "what each type of store can do", {}
)


def abilities(store: object) -> Abilities:
    """What ``store`` can do: one lookup per type where the type alone decides it.

    A front door built per request asks for every ability of its store; a type that defines
    every method it has (no ``__getattr__``, or instances without a ``__dict__`` of their
    own to add some) answers from one lookup. Others are asked each time, as :func:`conforms`.
    """
    kind = type(store)
    found = _ABILITIES.get(kind)
    if found is not None:
        return found
    found = Abilities(
        conforms(store, Store),
        conforms(store, SupportsSetIfAbsent),
        conforms(store, SupportsBatch),
        conforms(store, SupportsCompareAndSet),
        conforms(store, SupportsGetMany),
    )
    protocols = (Store, SupportsSetIfAbsent, SupportsBatch, SupportsCompareAndSet, SupportsGetMany)
    complete = all(not _MISSING[(kind, protocol)] for protocol in protocols)
    if complete or not (hasattr(kind, "__getattr__") or hasattr(store, "__dict__")):
        _ABILITIES[kind] = found
    return found


def positive_int(name: str, value: object) -> int:
    """Check that an argument is a positive integer (``bool`` is not one).

    Raises:
        ConfigurationError: Naming the argument and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return value


def validate_ttl(ttl: float | None) -> float | None:
    """Check a TTL argument: ``None`` or a positive, finite number of seconds.

    Raises:
        ConfigurationError: When ``ttl`` is not a positive number.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise ConfigurationError(
            f"ttl must be a number of seconds or None, got {type(ttl).__name__}"
        )
    if not ttl > 0 or ttl == float("inf"):
        raise ConfigurationError(f"ttl must be a positive, finite number of seconds, got {ttl!r}")
    return float(ttl)
