"""Tornado: one asyncio event loop per process, fork_processes(N) for N > 1 (the posts'
Tornado setup). /sleep awaits asyncio.sleep; /db is synchronous sqlite3 (it blocks the loop,
as a synchronous driver in a Tornado handler does). Usage: python tornado_server.py PORT N"""
import asyncio
import os
import random
import sqlite3
import sys

import tornado.httpserver
import tornado.netutil
import tornado.process
import tornado.web

_db = None


class Hello(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/plain")
        self.write("hello, world!")


class Sum(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/plain")
        self.write("sum=%d" % sum(random.randint(100, 999) for _ in range(1000)))


class Sleep(tornado.web.RequestHandler):
    async def get(self):
        try:
            ms = int(self.get_query_argument("ms"))
            assert 0 <= ms <= 10000
        except (ValueError, AssertionError, tornado.web.MissingArgumentError):
            self.set_status(400)
            self.write("ms must be an integer in 0..=10000\n")
            return
        await asyncio.sleep(ms / 1000)
        self.set_header("Content-Type", "text/plain")
        self.write("slept=%d" % ms)


class Db(tornado.web.RequestHandler):
    def get(self):
        global _db
        try:
            queries = int(self.get_query_argument("queries", "10"))
            assert 1 <= queries <= 500
        except (ValueError, AssertionError):
            self.set_status(400)
            self.write("queries must be an integer in 1..=500\n")
            return
        if _db is None:
            _db = sqlite3.connect("file:%s?mode=ro" % os.environ["ARCHZOO_DB"], uri=True)
        total = 0.0
        for _ in range(queries):
            start = random.randint(1, 1_000_000 - 10)
            for (value,) in _db.execute("SELECT value FROM test WHERE id >= ? LIMIT 10", (start,)):
                total += value
        self.set_header("Content-Type", "text/plain")
        self.write("%.6f" % total)


def main():
    port, workers = int(sys.argv[1]), int(sys.argv[2])
    sockets = tornado.netutil.bind_sockets(port, os.environ.get("ARCHZOO_PEER_HOST", "127.0.0.1"))
    if workers > 1:
        tornado.process.fork_processes(workers)
    app = tornado.web.Application(
        [(r"/", Hello), (r"/plaintext", Hello), (r"/sum", Sum), (r"/sleep", Sleep), (r"/db", Db)]
    )

    async def serve():
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
