"""Each compressor setting's default is written once, in its settings.

A front door taking a compressor setting writes its default as ``DEFAULTS.lease_ttl`` (say),
never as a literal again; the one literal beside the settings' own is a front door's default
that differs on purpose (its docstring says why), listed below. The package's source is read
with ``ast``: keyword defaults, and class attributes (dataclass fields), named as a setting of
:class:`~slimcache.core.settings.compressor.CompressorSettings` and given a literal.
"""

from __future__ import annotations

import ast
import inspect
from collections import defaultdict
from dataclasses import MISSING, fields
from pathlib import Path

from slimcache.core.settings.compressor import CompressorSettings
from slimcache.stores import protocol

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "slimcache"
SETTINGS = "slimcache/core/settings/compressor.py"

# The settings that have a default (the summarizer has none).
NAMES = frozenset(f.name for f in fields(CompressorSettings) if f.default is not MISSING)

# The stores' layer lies below the compressor: a ``ttl`` or ``namespace`` there is a store's
# own argument, as is the ``ttl`` of a method implementing a store call anywhere (a wrapper
# timing a store, the compressor's own store calls).
BELOW = "slimcache/stores/"
STORE_CALLS = frozenset(
    name
    for kind in vars(protocol).values()
    if inspect.isclass(kind) and getattr(kind, "_is_protocol", False)
    for name in vars(kind)
    if not name.startswith("_")
)

# Front doors whose default differs from the compressor's on purpose, by (module, where,
# setting): the second and last place a setting's default may be a literal.
DIFFERS_ON_PURPOSE: dict[tuple[str, str, str], str] = {
    # The agent integrations compress by LangChain's sizes, and degrade rather than raise.
    ("slimcache/frameworks/settings.py", "AgentSettings", "trigger"): "LangChain's trigger",
    ("slimcache/frameworks/settings.py", "AgentSettings", "keep"): "LangChain's keep",
    ("slimcache/frameworks/settings.py", "AgentSettings", "on_summarizer_error"): "degrade",
    # A size (("messages", 80), ...), which the integration turns into the compressor's ceiling.
    ("slimcache/frameworks/settings.py", "AgentSettings", "ceiling"): "a size",
    # A stateful compressor drops what it summarized: no tree could read it again.
    (
        "slimcache/recipes/conversation_compressor.py",
        "ConversationCompressor.__init__",
        "strategy",
    ): "extend",
}

# Where a literal given to a setting's name is no default at all, by (module, where).
NOT_A_DEFAULT: dict[tuple[str, str], str] = {
    # None: the setting the snapshot holds.
    ("slimcache/recipes/conversation_compressor.py", "ConversationCompressor.deserialize"): "",
    # None: no ceiling size to read; the function only asks whether a size is a fraction.
    ("slimcache/frameworks/sizes.py", "needs_context_size"): "",
    # A record's own field: the fingerprint of the batches folded in, not the setting.
    ("slimcache/llama_index/_ledger.py", "Ledger"): "",
}


def is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


class Defaults(ast.NodeVisitor):
    """The literal defaults of one module given to a setting's name, as (where, name, line)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str, int]] = []
        self.scope: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        for statement in node.body:
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and statement.value is not None
            ):
                self.add(statement.target.id, statement.value)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        arguments = node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        pairs = [
            *zip(
                positional[len(positional) - len(arguments.defaults) :],
                arguments.defaults,
                strict=True,
            ),
            *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
        ]
        if node.name not in STORE_CALLS:
            for argument, default in pairs:
                if default is not None:
                    self.add(argument.arg, default)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def add(self, name: str, value: ast.expr) -> None:
        if name in NAMES and is_literal(value):
            self.found.append((".".join(self.scope), name, value.lineno))


def literal_defaults() -> dict[str, list[str]]:
    """Each setting's literal defaults but its own, as ``module:line (where)``."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module == SETTINGS or module.startswith(BELOW):
            continue
        visitor = Defaults()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        for where, name, line in visitor.found:
            if (module, where) not in NOT_A_DEFAULT:
                allowed = (module, where, name) in DIFFERS_ON_PURPOSE
                found[name].append(f"{module}:{line} ({where}){'' if allowed else ' *'}")
    return found


def test_a_settings_default_is_a_literal_in_its_settings_and_at_most_one_front_door() -> None:
    repeated = {
        name: sites
        for name, sites in literal_defaults().items()
        if len(sites) > 1 or any(site.endswith("*") for site in sites)
    }
    assert repeated == {}, "write these defaults as DEFAULTS.<setting> (* not allowed)"


def test_the_scan_finds_what_it_is_for() -> None:
    visitor = Defaults()
    source = (
        "class Front:\n"
        "    lease_ttl: float = 10.0\n"
        "    namespace: str = DEFAULTS.namespace\n"
        "    def __init__(self, *, ttl=None, checkpoints=DEFAULTS.checkpoints, window=4):\n"
        "        pass\n"
        "    async def set(self, key, value, *, ttl=None):\n"
        "        pass\n"
    )
    visitor.visit(ast.parse(source))
    assert visitor.found == [("Front", "lease_ttl", 2), ("Front.__init__", "ttl", 4)]
    # Every listed exception names a place that exists.
    sites = {(module, where) for module, where, _ in DIFFERS_ON_PURPOSE} | set(NOT_A_DEFAULT)
    for module, where in sites:
        assert where.split(".")[-1] in (ROOT / module).read_text(encoding="utf-8")
