"""The live tier's wire tap (``tests/local/tap.py``) reads back the HTTP requests it passed on.

The tap itself runs only in ``make test-local``; its parser runs everywhere, on bytes written here:
requests split anywhere across reads, several on one kept-alive connection, and a chunked body.
"""

from __future__ import annotations

import threading

from tests.local.tap import RequestParser, TappedRequest


def parse(*reads: bytes) -> list[TappedRequest]:
    out: list[TappedRequest] = []
    parser = RequestParser(out, threading.Lock())
    for data in reads:
        parser.feed(data)
    return out


POST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 17\r\n\r\n{"messages": [1]}'
)
GET = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def test_requests_split_across_reads_and_kept_alive_are_each_read_whole() -> None:
    stream = GET + POST + POST
    one_byte_reads = [stream[i : i + 1] for i in range(len(stream))]
    for reads in ([stream], one_byte_reads, [stream[:50], stream[50:120], stream[120:]]):
        got = parse(*reads)
        assert [(r.method, r.path) for r in got] == [
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("POST", "/v1/chat/completions"),
        ]
        assert got[0].body == b"" and got[1].json() == {"messages": [1]} == got[2].json()
        assert got[1].headers["content-type"] == "application/json"


def test_a_chunked_body_is_joined_and_an_unfinished_request_is_not_reported() -> None:
    chunked = (
        b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"a":\r\n3;x=1\r\n 1}\r\n0\r\n\r\n'
    )
    assert parse(chunked[:-2]) == []
    assert parse(POST[:-1]) == []
    [req] = parse(chunked, GET[:10])
    assert req.json() == {"a": 1}
