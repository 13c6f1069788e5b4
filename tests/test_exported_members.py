"""The public API is one curated, sorted ``__all__``."""

from __future__ import annotations

import slimcache


def test_all_is_sorted_and_complete() -> None:
    exported = slimcache.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper() or "_" not in n, n)) or (
        exported == sorted(exported)
    )
    public = {n for n in dir(slimcache) if not n.startswith("_")} | {"__version__"}
    modules = {n for n in public if type(getattr(slimcache, n)).__name__ == "module"}
    assert set(exported) == public - modules
    for name in exported:
        assert getattr(slimcache, name) is not None
