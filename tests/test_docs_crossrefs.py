"""The docstrings' Sphinx roles become links to the reference (scripts/docs_crossrefs.py)."""

from __future__ import annotations

import logging
import re

import griffe
import pytest

from scripts.docs_crossrefs import (
    HIDDEN,
    ROOT,
    Resolver,
    Site,
    SphinxRoles,
    documented_modules,
    rewrite,
    walk,
)


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    loader = griffe.GriffeLoader(docstring_parser=griffe.Parser("google"))
    loader.load("slimcache")
    return Resolver(Site(loader.modules_collection, documented_modules()))


def scope(resolver: Resolver, path: str) -> griffe.Object:
    found = resolver.site.lookup(path)
    assert found is not None, path
    return found


def test_the_documented_modules_are_read_from_the_reference_pages() -> None:
    roots = documented_modules()
    assert roots[0] == "slimcache"
    assert {"slimcache.stores", "slimcache.testing"} <= set(roots)


def test_a_name_in_the_docstrings_own_class_links_to_that_classs_entry(resolver: Resolver) -> None:
    role = ":meth:`compress`"
    trim = scope(resolver, "slimcache.TrimCompressor.compress_detailed")
    assert rewrite(role, trim, resolver) == "[`compress`][slimcache.TrimCompressor.compress]"
    convo = scope(resolver, "slimcache.ConversationCompressor")
    assert (
        rewrite(role, convo, resolver) == "[`compress`][slimcache.ConversationCompressor.compress]"
    )


def test_an_inherited_method_links_to_the_entry_under_the_inheriting_class(
    resolver: Resolver,
) -> None:
    # load_all is defined on the window memories' private base class.
    for name in ("ConversationWindowMemory", "TokenWindowMemory"):
        memory = scope(resolver, f"slimcache.{name}")
        expected = f"[`load_all`][slimcache.{name}.load_all]"
        assert rewrite(":meth:`load_all`", memory, resolver) == expected


def test_a_name_imported_by_neither_the_module_nor_its_package_resolves_in_the_public_modules(
    resolver: Resolver,
) -> None:
    protocol = scope(resolver, "slimcache.stores.SetOp")
    assert (
        rewrite(":meth:`Store.set`", protocol, resolver)
        == "[`Store.set`][slimcache.stores.Store.set]"
    )


def test_an_object_on_two_pages_is_linked_on_the_page_of_the_docstring(resolver: Resolver) -> None:
    stores = scope(resolver, "slimcache.stores")
    assert rewrite(":class:`Store`", stores, resolver) == "[`Store`][slimcache.stores.Store]"
    compressor = scope(resolver, "slimcache.SummarizeCompressor")
    assert rewrite(":class:`Store`", compressor, resolver) == "[`Store`][slimcache.Store]"


def test_the_title_follows_sphinx(resolver: Resolver) -> None:
    module = scope(resolver, "slimcache")
    assert rewrite(":class:`~slimcache.stores.ThreadKeys`", module, resolver) == (
        "[`ThreadKeys`][slimcache.stores.ThreadKeys]"
    )
    assert rewrite(":class:`slimcache.Stats`", module, resolver) == (
        "[`slimcache.Stats`][slimcache.Stats]"
    )
    assert rewrite(":attr:`the report <slimcache.SummaryContext.report>`", module, resolver) == (
        "[`the report`][slimcache.SummaryContext.report]"
    )
    assert rewrite(":class:`!Stats`", module, resolver) == "`Stats`"


def test_an_internal_name_is_code_that_links_only_if_the_site_shows_it(
    resolver: Resolver,
) -> None:
    module = scope(resolver, "slimcache")
    assert rewrite(":mod:`slimcache.core.settings.compressor`", module, resolver) == (
        '<autoref identifier="slimcache.core.settings.compressor" optional>'
        "<code>slimcache.core.settings.compressor</code></autoref>"
    )


def test_a_name_that_resolves_to_nothing_is_code_and_a_warning(
    resolver: Resolver, caplog: pytest.LogCaptureFixture
) -> None:
    module = scope(resolver, "slimcache")
    with caplog.at_level(logging.WARNING):
        assert rewrite("see :class:`NoSuchStore`.", module, resolver) == "see `NoSuchStore`."
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert ":class:`NoSuchStore` names nothing" in caplog.records[0].getMessage()
    # The warning goes to mkdocs's logger, where a strict build counts it as a failure.
    assert caplog.records[0].name.startswith("mkdocs.")


def test_a_standard_library_name_is_code_without_a_warning(
    resolver: Resolver, caplog: pytest.LogCaptureFixture
) -> None:
    module = scope(resolver, "slimcache")
    with caplog.at_level(logging.WARNING):
        assert rewrite(":func:`asyncio.to_thread`", module, resolver) == "`asyncio.to_thread`"
        assert rewrite(":class:`RuntimeError`", module, resolver) == "`RuntimeError`"
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        rewrite(":meth:`open`", module, resolver)  # a method, never the builtin open
    assert len(caplog.records) == 1


def test_the_extension_rewrites_every_docstring_the_site_shows() -> None:
    loader = griffe.GriffeLoader(
        extensions=griffe.load_extensions(SphinxRoles()),
        docstring_parser=griffe.Parser("google"),
    )
    loader.load("slimcache")
    site = Site(loader.modules_collection, documented_modules())
    role = re.compile(r":(?:class|meth|func|mod|data|attr|exc):`")
    package = site.lookup("slimcache")
    assert package is not None
    with_roles = [
        obj.path for obj in walk(package) if obj.docstring and role.search(obj.docstring.value)
    ]
    assert [path for path in with_roles if path in site.objects] == []
    compressor = site.lookup("slimcache.SummarizeCompressor")
    assert compressor is not None
    assert compressor.docstring is not None
    assert "[`Concat`][slimcache.Concat]" in compressor.docstring.value


def test_the_hidden_members_are_the_filters_of_mkdocs_yml() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    filters = re.search(r"^\s*filters: \[(.*)\]$", config, flags=re.M)
    assert filters is not None
    patterns = [f.strip().strip('"') for f in filters.group(1).split(",")]
    assert all(p.startswith("!") for p in patterns)
    assert HIDDEN.pattern == "|".join(p[1:] for p in patterns)
