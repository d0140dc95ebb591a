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


@pytest.mark.parametrize("origin", ["https://bucket.s3.us-east-1.amazonaws.com", "http://127.0.0.1:4566"])
@pytest.mark.parametrize("token", [None, "session-token"])
def test_a_ranged_get_is_signed_as_botocore_signs_it(origin: str, token: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`clients.RangedGets.signed` gives the headers botocore's S3 SigV4 signer gives the same GET (the
    signature too), with or without a session token, over HTTPS and HTTP."""
    import datetime
    import types
    import urllib.parse

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    when = datetime.datetime(2026, 12, 2, 2, 5, 9, tzinfo=datetime.UTC)
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    fake_client = types.SimpleNamespace(meta=types.SimpleNamespace(region_name="eu-west-2", events=None))
    gets = clients.RangedGets(fake_client, creds)
    path = "/" + urllib.parse.quote("incoming/run 1/s0001_R1+x~ü.fastq.gz", safe="/~")
    ours = gets.signed(origin, path, "bytes=0-1048575", when)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when.replace(tzinfo=None))
    request = AWSRequest(method="GET", url=origin + path, headers={"Range": "bytes=0-1048575"})
    botocore.auth.S3SigV4Auth(creds.get_frozen_credentials(), "s3", "eu-west-2").add_auth(request)
    assert ours == dict(request.headers.items())
