"""The package's version, which ``slimcache.__version__`` and ``slimcache --version`` give and
the installed distribution's metadata repeats (``pyproject.toml``)."""

__all__ = ["VERSION"]

VERSION = "0.2.0"
