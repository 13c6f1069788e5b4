"""Sphinx cross-reference roles in the docstrings, turned into links on the docs site.

The docstrings name other objects with Sphinx roles (``:class:`Store```, ``:meth:`compress```,
``:mod:`slimcache.stores```), which read well in the source and in ``help()``. mkdocstrings
renders docstrings as Markdown, where a role would show as its literal text, so this griffe
extension (registered in ``mkdocs.yml``) rewrites every role in the docstrings the site shows,
once the package is loaded:

- a name the site documents becomes an autorefs link to its entry;
- a name that exists but has no entry on the site (an internal helper) becomes an optional
  link: shown as code with its full path as a tooltip, or a link should the site document it;
- a name that resolves to nothing stays code, and a warning names it, so the strict build fails
  until the docstring or this resolver is fixed.

A name resolves as Sphinx would find it: as written when it is a full path, then in the
docstring's own scope (the object, its class, its module and the packages above it, imports
included), then in each module the reference pages document, and last by the one object of the
package whose path ends with it. ``~`` shows only the last part of the name, ``!`` keeps it
unlinked and ``title <target>`` sets the text, as in Sphinx.
"""

from __future__ import annotations

import builtins
import contextlib
import html
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = "slimcache"

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|meth|func|mod|data|attr|exc|obj|const|type):`(?P<body>[^`]+)`"
)
EXPLICIT_TITLE = re.compile(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", flags=re.S)
AUTODOC = re.compile(r"^:::\s+(?P<path>[\w.]+)\s*$", flags=re.M)
# Members the reference leaves out: private names and the module hooks that serve moved names.
# The same rule is the mkdocstrings ``filters`` option in mkdocs.yml.
HIDDEN = re.compile(r"^_[^_]|^__(getattr|dir)__$")

logger = logging.getLogger(f"mkdocs.plugins.{__name__}")


def documented_modules(docs: Path = DOCS) -> list[str]:
    """The modules the reference pages document, from their ``::: module`` lines."""
    return sorted(
        {m["path"] for page in docs.rglob("*.md") for m in AUTODOC.finditer(page.read_text())}
    )


def final(obj: griffe.Object | griffe.Alias) -> griffe.Object | None:
    """The object an alias (an import) stands for, or ``None`` when it leaves the package."""
    if not isinstance(obj, griffe.Alias):
        return obj
    try:
        return obj.final_target
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


@dataclass
class Site:
    """What the reference shows: for each path in the package, the entries that show it.

    An object is found by its own path and by the path it was reached through, so a method a
    class inherits (``TokenWindowMemory.load_all``, defined on a private base) finds the entry
    under that class. An object exported by two documented modules has an entry on each page.
    """

    collection: griffe.ModulesCollection
    roots: list[str]
    entries: dict[str, list[str]] = field(default_factory=dict)
    objects: dict[str, griffe.Object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for root in self.roots:
            module = self.lookup(root)
            if module is not None:
                self._show(module, root, root)
        # After every declared member, so that a base class's own entry comes first.
        for obj in [obj for obj in self.objects.values() if obj.is_class]:
            for shown_as in list(self.entries[obj.path]):
                for name, member in obj.inherited_members.items():
                    target = final(member)
                    if target is not None and not HIDDEN.search(name):
                        self._show(target, f"{obj.path}.{name}", f"{shown_as}.{name}")

    def _show(self, obj: griffe.Object, reached_as: str, shown_as: str) -> None:
        for path in dict.fromkeys((reached_as, obj.path)):
            self.entries.setdefault(path, []).append(shown_as)
        self.objects.setdefault(obj.path, obj)
        for name, member in obj.members.items():
            if HIDDEN.search(name) or (obj.is_module and not member.is_public):
                continue
            target = final(member)
            if target is None or target.is_module or f"{obj.path}.".startswith(f"{target.path}."):
                continue  # another module's page, or a cycle back to an enclosing object
            self._show(target, f"{obj.path}.{name}", f"{shown_as}.{name}")

    def lookup(self, path: str) -> griffe.Object | None:
        """The object at ``path`` (a module path, or through any import), if there is one."""
        try:
            found = self.collection[path]
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        return final(found)

    def entry(self, path: str, near: griffe.Object) -> str | None:
        """The entry that shows the object at ``path``, on the page showing ``near`` if it can."""
        shown = self.entries.get(path)
        if shown is None and (found := self.lookup(path)) is not None:
            shown = self.entries.get(found.path)
        if not shown:
            return None
        here = [self.root_of(entry) for entry in self.entries.get(near.path, [])[:1]]
        return next((entry for entry in shown if [self.root_of(entry)] == here), shown[0])

    def root_of(self, entry: str) -> str:
        """The documented module whose page holds ``entry``."""
        return max((r for r in self.roots if f"{entry}.".startswith(f"{r}.")), key=len)


@dataclass
class Resolver:
    """Finds the object a role names, from the docstring it is written in."""

    site: Site
    by_suffix: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        package = self.site.lookup(PACKAGE)
        for obj in walk(package) if package is not None else ():
            parts = obj.path.split(".")
            for start in range(1, len(parts)):
                self.by_suffix.setdefault(".".join(parts[start:]), []).append(obj.path)

    def resolve(self, name: str, scope: griffe.Object) -> str | None:
        """The path of the object ``name`` means in the docstring of ``scope``, or ``None``."""
        for path in self._candidates(name, scope):
            if path in self.site.entries or self.site.lookup(path) is not None:
                return path
        return None

    def _candidates(self, name: str, scope: griffe.Object) -> Iterator[str]:
        yield name
        owner: griffe.Object | None = scope
        while owner is not None and not owner.is_module:
            if owner.is_class:
                yield f"{owner.path}.{name}"  # a member, inherited ones included
            owner = owner.parent
        first, dot, rest = name.partition(".")
        with contextlib.suppress(griffe.NameResolutionError):
            yield scope.resolve(first) + dot + rest
        for root in self.site.roots:
            yield f"{root}.{name}"
        candidates = self.by_suffix.get(name, [])
        if len(candidates) == 1:
            yield candidates[0]


def outside(role: str, name: str) -> bool:
    """Whether ``name`` is a builtin or in the standard library: not this site's to link."""
    first, dot, _ = name.partition(".")
    if first in sys.stdlib_module_names:
        return True
    # A method or attribute of a builtin is written with its class (``str.join``); a bare
    # ``:meth:`open``` means a method of this package, not the builtin ``open``.
    return hasattr(builtins, first) and bool(dot) == (role in ("meth", "attr"))


def walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    """``obj`` and everything defined inside it (imports left out)."""
    yield obj
    for member in obj.members.values():
        if not isinstance(member, griffe.Alias):
            yield from walk(member)


def rewrite(docstring: str, scope: griffe.Object, resolver: Resolver) -> str:
    """``docstring`` with every role replaced by a link or by code (see the module docstring)."""

    def replace(match: re.Match[str]) -> str:
        body = match["body"].strip()
        link = not body.startswith("!")
        body = body.lstrip("!")
        if explicit := EXPLICIT_TITLE.fullmatch(body):
            title, target = explicit["title"], explicit["target"].strip()
        else:
            target = body
            title = body.lstrip("~.").rsplit(".", 1)[-1] if body.startswith("~") else body
        target = target.lstrip("~.")
        code = f"`{title}`"
        if not link:
            return code
        found = resolver.resolve(target, scope)
        if found is None and outside(match["role"], target):
            return code
        if found is None:
            logger.warning(
                "%s: %s names nothing in %s; shown as code",
                scope.path,
                match[0],
                PACKAGE,
            )
            return code
        shown_as = resolver.site.entry(found, scope)
        if shown_as is not None:
            return f"[{code}][{shown_as}]"
        logger.debug("%s: %s is not on the site; shown as code", scope.path, match[0])
        return f'<autoref identifier="{found}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(replace, docstring)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles in the docstrings of the objects the reference shows."""

    def __init__(self, roots: Iterable[str] | None = None) -> None:
        super().__init__()
        self.roots = list(roots) if roots is not None else documented_modules()

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite the roles once the whole package is loaded."""
        if pkg.name != PACKAGE:
            return
        resolver = Resolver(Site(loader.modules_collection, self.roots))
        for obj in resolver.site.objects.values():
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj.docstring.value, obj, resolver)
