"""What the boto3-based stores share: option checks, timeouts, and the client they build."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from botocore.config import Config

from slimcache import ConfigurationError
from slimcache.stores import (
    BOTO_CLIENT_OPTIONS,
    BOTO_URL_OPTIONS,
    DEFAULT_MAX_POOL_CONNECTIONS,
    DEFAULT_STORE_TIMEOUT,
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


def test_slimcache_imports_without_boto3() -> None:
    script = textwrap.dedent(
        """
        import sys

        class NoBoto:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("boto3", "botocore"):
                    raise ImportError(f"no {name} here")
                return None

        sys.meta_path.insert(0, NoBoto())
        import slimcache
        import slimcache.stores
        import slimcache.stores.boto
        assert "boto3" not in sys.modules and "botocore" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_unknown_client_options_are_named_before_the_timeout_is_read() -> None:
    assert check_boto_options("MyStore", {}, {"aws_access_key_id": "a", "config": None}) == (
        DEFAULT_STORE_TIMEOUT
    )
    assert check_boto_options("MyStore", {"timeout": "2.5"}, {}) == 2.5
    with pytest.raises(ConfigurationError) as raised:
        check_boto_options("MyStore", {"timeout": -1}, {"use_ssl": True, "zz": 1, "aa": 2})
    known = ", ".join(sorted(BOTO_CLIENT_OPTIONS | {"config", "profile_name"}))
    assert str(raised.value) == f"unknown MyStore option 'aa' (known: {known})"
    with pytest.raises(ConfigurationError, match="timeout"):
        check_boto_options("MyStore", {"timeout": -1}, {})


def test_a_store_url_is_split_once_its_form_is_checked() -> None:
    parts = split_store_url("S3://bucket/a/b?x=1", "s3", "MyStore", "an", "the bucket", path=True)
    assert (parts.netloc, parts.path, parts.query) == ("bucket", "/a/b", "x=1")
    assert split_store_url("ddb://t/", "ddb", "MyStore", "a", "the table", path=False).netloc == "t"
    cases = [
        (7, True, "store URL must be a string, got int"),
        ("redis://h", True, "MyStore needs an s3:// URL, got 'redis://h'"),
        ("s3://u:secret@bucket", True, "an s3:// URL names only the bucket"),
        ("s3://bucket:9000", True, "an s3:// URL names only the bucket"),
        ("s3://bucket/p#f", True, "an s3:// URL has no fragment, got 's3://bucket/p#f'"),
        ("s3://bucket/p", False, "an s3:// URL has no path or fragment, got 's3://bucket/p'"),
        ("s3://bucket#f", False, "an s3:// URL has no path or fragment, got 's3://bucket#f'"),
    ]
    for url, path, message in cases:
        with pytest.raises(ConfigurationError) as raised:
            split_store_url(url, "s3", "MyStore", "an", "the bucket", path=path)
        assert str(raised.value) == message
    with pytest.raises(ConfigurationError) as hidden:
        split_store_url("redis://:hunter2@h", "s3", "MyStore", "an", "the bucket", path=True)
    assert "hunter2" not in str(hidden.value)


KNOWN = {**BOTO_URL_OPTIONS, "flavour": "flavour"}


def test_query_options_fill_their_keywords_alongside_the_given_keywords() -> None:
    options = query_options(
        "s3://b?region=eu-west-3&timeout=2",
        "region=eu-west-3&timeout=2",
        KNOWN,
        "s3",
        {"flavour": "x", "read_timeout": None},
    )
    assert options == {"region_name": "eu-west-3", "timeout": "2", "flavour": "x"}


def test_query_options_name_what_is_wrong() -> None:
    cases = [
        ("a", "malformed query in store URL 's3://b?a'"),
        ("nope=1", "unknown s3:// option 'nope' (known: "),
        ("region=x&region_name=y", "s3:// option 'region_name' is given twice"),
        ("timeout=1", "option 'timeout' is given both in the URL"),
    ]
    for query, message in cases:
        with pytest.raises(ConfigurationError) as raised:
            query_options(f"s3://b?{query}", query, KNOWN, "s3", {"timeout": 3})
        assert str(raised.value).startswith(message)
    with pytest.raises(ConfigurationError, match="did you mean 'timeout'"):
        query_options("s3://b?timeot=1", "timeot=1", KNOWN, "s3", {}, suggest=True)


@pytest.mark.parametrize("value", ["https://s3.example.com", "http://localhost:9000"])
def test_an_http_endpoint_with_a_host_is_kept(value: str) -> None:
    assert check_endpoint_url(value) == value


def test_a_bad_endpoint_is_named() -> None:
    with pytest.raises(ConfigurationError, match="endpoint_url must be a string, got int"):
        check_endpoint_url(9000)
    with pytest.raises(ConfigurationError, match="http:// or https:// URL with a host"):
        check_endpoint_url("ftp://example.com")
    with pytest.raises(ConfigurationError, match="http:// or https:// URL with a host"):
        check_endpoint_url("http://")


def test_a_region_must_look_like_one() -> None:
    assert check_region_name("eu-west-3") == "eu-west-3"
    for bad in ("EU-WEST-3", "eu--west", "-eu", "", 3):
        with pytest.raises(ConfigurationError, match="region_name must be an AWS region name"):
            check_region_name(bad)


def test_one_attempt_splits_the_bound_in_half() -> None:
    config = boto_client_config({}, 4.0)
    assert config == {
        "connect_timeout": 2.0,
        "read_timeout": 2.0,
        "retries": {"total_max_attempts": 1, "mode": "standard"},
        "max_pool_connections": DEFAULT_MAX_POOL_CONNECTIONS,
    }


def test_retries_share_the_bound() -> None:
    config = boto_client_config({"read_timeout": 1.5, "max_pool_connections": 3}, 6.0, retries=2)
    assert config["connect_timeout"] == pytest.approx(0.5)
    assert config["read_timeout"] == 1.5
    assert config["retries"] == {"max_attempts": 2, "mode": "standard"}
    assert config["max_pool_connections"] == 3


def test_timeouts_past_the_bound_are_refused_with_the_attempts_named() -> None:
    with pytest.raises(ConfigurationError) as one:
        boto_client_config({"connect_timeout": 2, "read_timeout": 2}, 3.0)
    assert str(one.value) == (
        "connect_timeout + read_timeout (2 + 2 s) must fit in timeout (3 s): "
        "raise timeout or lower them"
    )
    with pytest.raises(ConfigurationError) as many:
        boto_client_config({"connect_timeout": 2}, 3.0, retries=2)
    assert str(many.value) == (
        "connect_timeout + read_timeout (2 + None s) of each of the 3 attempts "
        "(max_attempts=2 retries) must fit in timeout (3 s): raise timeout or lower them"
    )


def test_a_bad_pool_size_is_named() -> None:
    with pytest.raises(ConfigurationError, match="max_pool_connections"):
        boto_client_config({"max_pool_connections": 0}, 1.0)


def test_client_kwargs_take_out_config_and_check_endpoint_region_profile() -> None:
    extra = Config(user_agent_extra="x")
    client_options: dict[str, Any] = {"aws_access_key_id": "a", "config": extra}
    options = {"endpoint_url": "http://localhost:1", "region_name": "us-east-1"}
    got_extra, kwargs = boto_client_kwargs(options, client_options, None)
    assert got_extra is extra
    assert "config" not in client_options
    assert kwargs == {
        "aws_access_key_id": "a",
        "endpoint_url": "http://localhost:1",
        "region_name": "us-east-1",
    }
    with pytest.raises(ConfigurationError, match="profile_name must be a string, got int"):
        boto_client_kwargs({}, {}, 7)


def test_the_client_built_tells_its_endpoint_and_pool() -> None:
    config = boto_client_config({"max_pool_connections": 4}, 2.0)
    client = make_boto_client(
        "s3",
        "S3",
        config,
        Config(user_agent_extra="x"),
        None,
        {
            "endpoint_url": "http://127.0.0.1:9999",
            "region_name": "us-east-1",
            "aws_access_key_id": "a",
            "aws_secret_access_key": "b",
        },
    )
    try:
        assert endpoint_of(client) == ("127.0.0.1", 9999)
        assert pool_size(client) == 4
        assert client.meta.config.connect_timeout == 1.0
        assert client.meta.config.user_agent_extra == "x"
    finally:
        client.close()


def test_what_tells_nothing_gets_the_defaults() -> None:
    assert endpoint_of(object()) == (None, None)
    assert pool_size(object()) == DEFAULT_MAX_POOL_CONNECTIONS


def test_a_bad_config_or_profile_is_a_configuration_error() -> None:
    config = boto_client_config({}, 2.0)
    bad_config = r"config must be a botocore\.config\.Config, got dict"
    with pytest.raises(ConfigurationError, match=bad_config):
        make_boto_client("s3", "S3", config, {"a": 1}, None, {})
    with pytest.raises(ConfigurationError, match="cannot build the Thing client: "):
        make_boto_client("s3", "Thing", config, None, "no-such-profile-slimcache", {})
