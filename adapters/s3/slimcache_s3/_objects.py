"""The S3 requests behind each operation of the store, on the objects of one bucket.

Every method here is a blocking boto3 call (or a few), run on one of the store's worker
threads. An entry's expiry time is the object's user metadata ``x-amz-meta-expires-at`` (Unix
seconds); an expired object reads as absent and is deleted on that read. The conditional
operations use conditional requests: ``If-None-Match: *`` to write where nothing is, and
``If-Match`` on the ETag just read to replace or delete only what was compared, so a write by
anyone in between makes them report that they did nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from botocore.exceptions import ClientError

from slimcache.stores import decode_value
from slimcache_s3._keys import body_value

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["EXPIRES_AT", "Objects", "describe_key"]

_log = logging.getLogger("slimcache_s3")

EXPIRES_AT = "expires-at"
"""The user metadata holding an entry's expiry time: the header x-amz-meta-expires-at."""

_KEY_REPR_LIMIT = 120


def describe_key(key: str) -> str:
    """A store key as messages show it: its ``repr``, cut to 120 characters."""
    text = repr(key)
    return text if len(text) <= _KEY_REPR_LIMIT else text[: _KEY_REPR_LIMIT - 3] + "..."


def _status(exc: ClientError) -> tuple[str, int]:
    """Return the error code and HTTP status of a failed S3 call."""
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return code, status


def _is_missing_key(exc: ClientError) -> bool:
    code, status = _status(exc)
    # HEAD answers carry no body, hence no code: a bare 404 there means the key.
    return code == "NoSuchKey" or (status == 404 and code in ("404", "NotFound"))


def _is_condition_failed(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 412 or code == "PreconditionFailed"


def _is_conditional_conflict(exc: ClientError) -> bool:
    code, _ = _status(exc)
    return code == "ConditionalRequestConflict"


def _lost_the_condition(exc: ClientError) -> bool:
    """Whether a conditional write or delete failed because the object changed or vanished."""
    return _is_missing_key(exc) or _is_condition_failed(exc) or _is_conditional_conflict(exc)


class _Read(NamedTuple):
    """An object as read: its value, its ETag, and whether its TTL has run out."""

    value: str
    etag: str
    expired: bool


class Objects:
    """The objects of one bucket, read and written as the store's entries.

    Args:
        client: The boto3 S3 client.
        bucket: The bucket.
        clock: Wall clock in Unix seconds, compared with the stored expiry times.
    """

    def __init__(self, client: S3Client, bucket: str, clock: Callable[[], float]) -> None:
        self._client = client
        self._bucket = bucket
        self._clock = clock

    def get(self, key: str, name: str) -> str | None:
        """The value of the object ``name`` (store key ``key``); ``None`` when absent or
        expired, deleting an expired object."""
        found = self._read(key, name)
        if found is None:
            return None
        if found.expired:
            self._delete_expired(name, found.etag)
            return None
        return found.value

    def put(self, name: str, body: bytes, metadata: dict[str, str]) -> None:
        """Write the object ``name``, whatever it held."""
        self._client.put_object(Bucket=self._bucket, Key=name, Body=body, Metadata=metadata)

    def delete(self, name: str) -> None:
        """Delete the object ``name``; a missing object is not an error."""
        self._client.delete_object(Bucket=self._bucket, Key=name)

    def set_if_absent(self, name: str, body: bytes, metadata: dict[str, str]) -> bool:
        """Write the object ``name`` only where there is none, or only an expired one."""
        # Two rounds: the object can vanish between the failed write and the look at it.
        for _ in range(2):
            try:
                self._client.put_object(
                    Bucket=self._bucket, Key=name, Body=body, Metadata=metadata, IfNoneMatch="*"
                )
                return True
            except ClientError as exc:
                if _is_conditional_conflict(exc):
                    return False
                if not _is_condition_failed(exc):
                    raise
            try:
                head = self._client.head_object(Bucket=self._bucket, Key=name)
            except ClientError as exc:
                if _is_missing_key(exc):
                    continue
                raise
            if not self._expired(head.get("Metadata", {}), name):
                return False
            try:
                # Replace the expired object only if nobody replaced it first.
                self._client.put_object(
                    Bucket=self._bucket,
                    Key=name,
                    Body=body,
                    Metadata=metadata,
                    IfMatch=head["ETag"],
                )
                return True
            except ClientError as exc:
                if _is_missing_key(exc):
                    continue
                if _is_condition_failed(exc) or _is_conditional_conflict(exc):
                    return False
                raise
        return False

    def compare_and_set(
        self, key: str, name: str, expected: str, body: bytes, metadata: dict[str, str]
    ) -> bool:
        """Replace the object ``name`` only if it holds ``expected`` and has not expired."""
        found = self._read(key, name)
        if found is None or found.expired or found.value != expected:
            return False
        try:
            # Only over the object just compared: any write since then changed the ETag.
            self._client.put_object(
                Bucket=self._bucket, Key=name, Body=body, Metadata=metadata, IfMatch=found.etag
            )
        except ClientError as exc:
            if _lost_the_condition(exc):
                return False
            raise
        return True

    def compare_and_delete(self, key: str, name: str, expected: str) -> bool:
        """Delete the object ``name`` only if it holds ``expected`` and has not expired."""
        found = self._read(key, name)
        if found is None or found.expired or found.value != expected:
            return False
        try:
            self._client.delete_object(Bucket=self._bucket, Key=name, IfMatch=found.etag)
        except ClientError as exc:
            if _lost_the_condition(exc):
                return False
            raise
        return True

    def _read(self, key: str, name: str) -> _Read | None:
        """Read the object under ``name``; ``None`` when there is none."""
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=name)
        except ClientError as exc:
            if _is_missing_key(exc):
                return None
            raise
        with response["Body"] as stream:
            body = stream.read()
        expired = self._expired(response.get("Metadata", {}), name)
        return _Read(self._decode(key, name, body), response["ETag"], expired)

    def _delete_expired(self, name: str, etag: str) -> None:
        # Only the object that was read: a fresh one written since then has another ETag.
        try:
            self._client.delete_object(Bucket=self._bucket, Key=name, IfMatch=etag)
        except ClientError as exc:
            if _is_missing_key(exc) or _is_condition_failed(exc):
                return
            # The read itself succeeded; an expired object left behind is harmless.
            _log.warning("could not delete expired object %r: %s", name, exc)

    def _expired(self, metadata: Mapping[str, str], name: str) -> bool:
        raw = metadata.get(EXPIRES_AT)
        if raw is None:
            return False
        try:
            expires_at = float(raw)
        except ValueError:
            expires_at = math.nan
        if math.isnan(expires_at):
            # Some other program wrote it: keep the object rather than fail every read of it.
            _log.warning(
                "object %r in bucket %r has a malformed x-amz-meta-%s %r; treating it as "
                "never expiring",
                name,
                self._bucket,
                EXPIRES_AT,
                raw,
            )
            return False
        return expires_at <= self._clock()

    def _decode(self, key: str, name: str, body: bytes) -> str:
        """The value an object holds: after the header this store writes, else the whole body."""
        where = f"object {name!r} in bucket {self._bucket!r} (key {describe_key(key)})"
        raw = body_value(body)
        if raw is None:
            _log.warning(
                "%s was not written by slimcache's S3Store (no header line); reading its "
                "whole content as the value",
                where,
            )
            raw = body
        return decode_value(raw, where=where)
