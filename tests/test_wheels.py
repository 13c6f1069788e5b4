"""The four distributions build as wheels, and the wheels alone make a working install.

``uv build --all-packages`` makes the wheels; fresh virtual environments get them (the core alone
from the local wheels and nothing else; the core with the Redis adapter and the command line,
their drivers from the registry) and run the README's first example from outside the checkout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.servers.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = (
    "slimcache",
    "slimcache_redis",
    "slimcache_sql",
    "slimcache_s3",
    "slimcache_dynamodb",
)

pytestmark = pytest.mark.packaging


def _uv(*args: str, cwd: Path = ROOT) -> str:
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build the wheels"
    done = subprocess.run(
        [uv, *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd
    )
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dist = tmp_path_factory.mktemp("dist")
    _uv("build", "--all-packages", "--wheel", "--quiet", "--out-dir", str(dist))
    found = {path.name.split("-")[0]: path for path in dist.glob("*.whl")}
    assert sorted(found) == sorted(DISTRIBUTIONS)
    return found


def _venv(where: Path) -> Path:
    _uv("venv", "--quiet", "--python", sys.executable, str(where))
    return where / "bin" / "python"


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    example: str = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    return example


def _run(python: Path, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(python), *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_wheel_names_the_supported_pythons(wheels: dict[str, Path]) -> None:
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            metadata_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = archive.read(metadata_name).decode()
        assert "Requires-Python: >=3.10" in metadata, name
        for version in ("3.10", "3.11", "3.12", "3.13"):
            assert f"Classifier: Programming Language :: Python :: {version}\n" in metadata
        assert "Classifier: Typing :: Typed" in metadata, name


def test_every_wheel_holds_its_package_and_nothing_else(wheels: dict[str, Path]) -> None:
    # An adapter's tests sit beside its package (adapters/<name>/tests) and stay out of its wheel.
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            tops = {entry.split("/")[0] for entry in archive.namelist()}
        assert {top for top in tops if not top.endswith(".dist-info")} == {name}, sorted(tops)


def test_the_core_wheel_alone_runs_the_readme_example(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    python = _venv(tmp_path / "venv")
    dist = str(wheels["slimcache"].parent)
    _uv("pip", "install", "--quiet", "--python", str(python), "--no-index", "-f", dist, "slimcache")
    (tmp_path / "example.py").write_text(_readme_example())
    out = _run(python, "example.py", cwd=tmp_path)
    assert "4 earlier messages, starting with: turn 0" in out
    where = _run(python, "-c", "import slimcache, sys; print(slimcache.__file__)", cwd=tmp_path)
    assert str(tmp_path / "venv") in where
    installed = _uv("pip", "list", "--python", str(python), "--format", "freeze")
    assert sorted(line.split("==")[0] for line in installed.split()) == ["slimcache"]


def test_the_core_and_redis_wheels_run_on_a_real_redis(
    wheels: dict[str, Path], tmp_path: Path, redis_server: RedisServer
) -> None:
    url = redis_server.url
    python = _venv(tmp_path / "venv")
    core = f"{wheels['slimcache']}[redis,cli]"
    _uv("pip", "install", "--quiet", "--python", str(python), core, str(wheels["slimcache_redis"]))
    example = _readme_example().replace('"memory://"', f'"{url}"')
    assert url in example
    (tmp_path / "example.py").write_text(example)
    out = _run(python, "example.py", cwd=tmp_path)
    assert "4 earlier messages, starting with: turn 0" in out

    slimcache = str(tmp_path / "venv" / "bin" / "slimcache")
    done = subprocess.run(
        [slimcache, "inspect", url, "--thread", "chat-42"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "chat-42" in done.stdout
    assert "0-3" in done.stdout
