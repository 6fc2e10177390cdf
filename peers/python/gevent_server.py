"""gevent's WSGI server, one process: every connection a greenlet (Swoole-coroutine-like).
Usage: python gevent_server.py PORT"""
from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402

from gevent.pywsgi import WSGIServer  # noqa: E402

from app import app  # noqa: E402

WSGIServer((os.environ.get("ARCHZOO_PEER_HOST", "127.0.0.1"), int(sys.argv[1])), app, log=None).serve_forever()
