"""The process's AWS clients (``base/clients.py``)."""

from __future__ import annotations

import botocore.utils
import pytest

from seqlake.base import clients

TIMESTAMPS = [
    "Tue, 01 Dec 2026 22:30:00 GMT",  # S3's Last-Modified
    "Sun, 06 Nov 1994 08:49:37 GMT",
    "2026-12-01T22:30:00.000Z",  # a listing's LastModified
    "2026-12-01T22:30:00Z",
    "2026-12-01T22:30:00.123456Z",
    "2026-12-01T22:30:00+01:00",  # not the fast forms: botocore's reading
    "1764628200",
    1764628200.5,
    "Tue, 01 Xyz 2026 22:30:00 GMT",
]


@pytest.mark.parametrize("value", TIMESTAMPS)
def test_timestamps_read_as_botocore_reads_them(value: object) -> None:
    try:
        expected = botocore.utils.parse_timestamp(value)
    except ValueError:
        with pytest.raises(ValueError):
            clients.parse_timestamp(value)
        return
    found = clients.parse_timestamp(value)
    assert found == expected and type(found.tzinfo) is type(expected.tzinfo)


def test_clients_read_timestamps_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    try:
        made = clients.client("s3")
        # the endpoint's parser reads each response (made from the session's factory)
        parser = made._endpoint._response_parser_factory.create_parser("rest-xml")
        assert parser._timestamp_parser is clients.parse_timestamp
    finally:
        clients.reset()
