"""The statements of a SQL store, and the steps a call takes with them.

Every statement is built once per store as a SQLAlchemy expression (:class:`Statements`), which
SQLAlchemy compiles once and then finds in its cache, and compiled once more to the driver's
own SQL text (:class:`DriverSQL`) for calls that run on a connection the store keeps.

A call's logic is written once, as a generator of :class:`Query` steps: each step names a
statement, its parameters and the answer wanted, and receives that answer (or, for a call that
is one statement, as :class:`OneStep`). The store runs the same steps either through
SQLAlchemy's ``Connection`` or straight on the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Generic, Literal, NamedTuple, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    Double,
    Integer,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.sql.expression import Executable

__all__ = [
    "COUNT",
    "ROWS",
    "VALUE",
    "Answer",
    "DriverSQL",
    "OneStep",
    "Query",
    "Statements",
    "Steps",
    "Work",
    "build_statements",
    "count_of",
    "no_result",
    "no_steps",
    "one_row",
    "steps_of",
]

_T = TypeVar("_T")

# What a step wants back: the first column of the first row (or None), every row, or how many
# rows the statement changed.
Answer = Literal[0, 1, 2]
VALUE: Final = 0
ROWS: Final = 1
COUNT: Final = 2

# The one parameter of the statements that take a list of keys (``key IN (...)``).
_KEYS: Final = "keys"


class Query(NamedTuple):
    """One step of a call: run ``statement`` with ``parameters``, and answer ``answer``."""

    statement: str
    parameters: dict[str, Any]
    answer: Answer


# A call's logic: yields its steps, is sent each step's answer, returns the call's result.
Steps = Generator[Query, Any, _T]


class OneStep(Generic[_T]):
    """The logic of a call that is one statement: run ``query``, and make the call's result
    of its answer with ``finish``. Most calls are; they are run without a generator."""

    __slots__ = ("finish", "query")

    def __init__(self, query: Query, finish: Callable[[Any], _T]) -> None:
        self.query = query
        self.finish = finish


# A call's logic in either form: one step, or a function making the steps.
Work = OneStep[_T] | Callable[[], Steps[_T]]


def steps_of(work: Work[_T]) -> Steps[_T]:
    """The steps of ``work``, whichever its form."""
    if isinstance(work, OneStep):
        return _one_step(work)
    return work()


def _one_step(work: OneStep[_T]) -> Steps[_T]:
    answer = yield work.query
    return work.finish(answer)


def no_steps() -> Steps[None]:
    """Work taking no step (``SQLStore.setup`` only makes sure the table exists)."""
    yield from ()


def no_result(query: Query) -> OneStep[None]:
    """Work running ``query``, with no result."""
    return OneStep(query, _none)


def count_of(query: Query) -> OneStep[int]:
    """Work running ``query``, answering how many rows it changed."""
    return OneStep(query, int)


def one_row(query: Query) -> OneStep[bool]:
    """Work running ``query``, answering whether it changed exactly one row."""
    return OneStep(query, _is_one)


def _none(answer: object) -> None:
    return None


def _is_one(changed: int) -> bool:
    return changed == 1


@dataclass(frozen=True)
class Statements:
    """Every statement a store runs, built once with named parameters.

    A call only binds its values: SQLAlchemy then finds the compiled form in its cache by the
    statement's memoized cache key, instead of building and hashing a new expression tree.
    """

    get: Executable
    get_many: Executable
    set: Executable
    set_if_absent: Executable
    compare_and_set: Executable
    compare_and_delete: Executable
    delete: Executable
    delete_many: Executable
    purge_expired: Executable
    scan_keys: Executable

    def by_name(self) -> dict[str, Executable]:
        """The statements by the names steps give them."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


# The database's own clock, in Unix seconds as a double.
_SERVER_NOW: Final = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    # The time the statement began: one instant for every row the statement looks at.
    "postgresql": "CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION)",
}

# The statements whose one parameter is an expanding list of keys.
_EXPANDING: Final = frozenset({"get_many", "delete_many"})

# Texts kept for lists of different lengths; past this many they are made again as needed.
_EXPANDED_KEPT: Final = 64


def build_statements(table: Table, dialect: str) -> Statements:
    """Build the statements of a store on ``table``.

    Parameters: ``key`` and ``value`` (the row to write), ``ttl`` (its seconds to live, or
    ``None``), ``keys`` (an expanding list), ``expected`` (the value a conditional write
    requires), and for ``compare_and_set`` ``new_value`` and ``new_ttl`` (an UPDATE reserves the
    column names for its SET). Expiry times are the database's clock plus the TTL, and rows
    with ``expires_at <=`` the database's clock have expired.
    """
    columns = table.c
    now: ColumnElement[float] = literal_column(_SERVER_NOW[dialect], type_=Double())
    live = or_(columns.expires_at.is_(None), columns.expires_at > now)
    expired = and_(columns.expires_at.is_not(None), columns.expires_at <= now)
    key_matches = columns.key == bindparam("key", type_=Text())
    holds_expected = columns.value == bindparam("expected", type_=Text())

    insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    upsert = insert(table).values(
        key=bindparam("key", type_=Text()),
        value=bindparam("value", type_=Text()),
        expires_at=now + bindparam("ttl", type_=Double()),
    )
    replace = {"value": upsert.excluded.value, "expires_at": upsert.excluded.expires_at}
    return Statements(
        get=select(columns.value).where(key_matches, live),
        get_many=select(columns.key, columns.value).where(
            columns.key.in_(bindparam(_KEYS, expanding=True)), live
        ),
        set=upsert.on_conflict_do_update(index_elements=[columns.key], set_=replace),
        # The update branch fires only when the existing row has expired.
        set_if_absent=upsert.on_conflict_do_update(
            index_elements=[columns.key], set_=replace, where=expired
        ),
        compare_and_set=update(table)
        .where(
            columns.key == bindparam("match_key", type_=Text()),
            holds_expected,
            live,
        )
        .values(
            value=bindparam("new_value", type_=Text()),
            expires_at=now + bindparam("new_ttl", type_=Double()),
        ),
        compare_and_delete=delete(table).where(key_matches, holds_expected, live),
        delete=delete(table).where(key_matches),
        delete_many=delete(table).where(columns.key.in_(bindparam(_KEYS, expanding=True))),
        purge_expired=delete(table).where(expired),
        # A page of the live keys that start with a prefix, after a key, in order.
        scan_keys=select(columns.key)
        .where(
            func.substr(columns.key, literal_column("1"), bindparam("length", type_=Integer()))
            == bindparam("prefix", type_=Text()),
            columns.key > bindparam("after", type_=Text()),
            live,
        )
        .order_by(columns.key)
        .limit(bindparam("limit", type_=Integer()))
        .offset(literal_column("0")),
    )


@dataclass(frozen=True)
class _Compiled:
    """One statement as the driver's SQL text, and the order its parameters go in."""

    sql: str
    names: tuple[str, ...]
    compiled: SQLCompiler


class DriverSQL:
    """The statements compiled once, by the engine's dialect, to the SQL text its driver runs.

    The text is what SQLAlchemy itself would send (``?`` placeholders for SQLite, ``$1::VARCHAR``
    for asyncpg). A statement taking a list of keys gets one text per list length, made on
    first use and kept (the last few dozen lengths).
    """

    def __init__(self, statements: Statements, dialect: Dialect) -> None:
        self._compiled: dict[str, _Compiled] = {}
        for name, statement in statements.by_name().items():
            compiled = cast(
                "SQLCompiler", cast("ClauseElement", statement).compile(dialect=dialect)
            )
            names = tuple(compiled.positiontup or ())
            if name in _EXPANDING and names != (_KEYS,):
                raise AssertionError(f"{name} must take exactly one parameter, {_KEYS!r}")
            self._compiled[name] = _Compiled(compiled.string, names, compiled)
        self._expanded: dict[tuple[str, int], str] = {}

    def prepare(self, query: Query) -> tuple[str, Sequence[Any]]:
        """The SQL text and the positional parameters that run ``query``."""
        if query.statement in _EXPANDING:
            keys: list[str] = query.parameters[_KEYS]
            return self._expand(query.statement, len(keys)), keys
        compiled = self._compiled[query.statement]
        parameters = query.parameters
        return compiled.sql, [parameters[name] for name in compiled.names]

    def _expand(self, statement: str, count: int) -> str:
        sql = self._expanded.get((statement, count))
        if sql is None:
            if len(self._expanded) >= _EXPANDED_KEPT:
                self._expanded.clear()
            state = self._compiled[statement].compiled.construct_expanded_state(
                {_KEYS: [""] * count}
            )
            sql = self._expanded[(statement, count)] = state.statement
        return sql
