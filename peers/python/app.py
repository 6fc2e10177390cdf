"""The benchmark routes as a WSGI application, for the Python peers (gevent, uWSGI).

`/sleep` calls time.sleep: under gevent (monkey-patched) it parks one greenlet, under
uWSGI's prefork it blocks the worker process — each the model its server stands for.
`/db` runs the archzoo query on the same SQLite file (ARCHZOO_DB), one connection per
process, synchronous as the posts' drivers were.
"""
import os
import random
import sqlite3
import time
from urllib.parse import parse_qs

TEXT = [("Content-Type", "text/plain")]
_db = None


def _answer(start_response, status, body):
    body = body.encode()
    start_response(status, TEXT + [("Content-Length", str(len(body)))])
    return [body]


def _int_param(query, name, default, low, high):
    raw = parse_qs(query).get(name, [None])[0]
    if raw is None:
        return default
    value = int(raw)
    if not low <= value <= high:
        raise ValueError(name)
    return value


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    query = environ.get("QUERY_STRING", "")
    if path in ("/", "/plaintext"):
        return _answer(start_response, "200 OK", "hello, world!")
    if path == "/sum":
        total = sum(random.randint(100, 999) for _ in range(1000))
        return _answer(start_response, "200 OK", "sum=%d" % total)
    if path == "/sleep":
        try:
            ms = _int_param(query, "ms", None, 0, 10000)
            if ms is None:
                raise ValueError("ms")
        except ValueError:
            return _answer(start_response, "400 Bad Request", "ms must be an integer in 0..=10000\n")
        time.sleep(ms / 1000)
        return _answer(start_response, "200 OK", "slept=%d" % ms)
    if path == "/db":
        try:
            queries = _int_param(query, "queries", 10, 1, 500)
        except ValueError:
            return _answer(start_response, "400 Bad Request", "queries must be an integer in 1..=500\n")
        global _db
        if _db is None:
            _db = sqlite3.connect("file:%s?mode=ro" % os.environ["ARCHZOO_DB"], uri=True,
                                  check_same_thread=False)
        total = 0.0
        for _ in range(queries):
            start = random.randint(1, 1_000_000 - 10)
            for (value,) in _db.execute("SELECT value FROM test WHERE id >= ? LIMIT 10", (start,)):
                total += value
        return _answer(start_response, "200 OK", "%.6f" % total)
    return _answer(start_response, "404 Not Found", "not found\n")
