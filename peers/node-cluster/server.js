// node-cluster: Node.js `http` with `cluster` — a primary forks N workers that share the
// listening socket, each one a single-threaded event loop (Workerman-like). Stands beside
// archzoo's prefork-eventloop. Usage: node server.js PORT WORKERS
'use strict';
const cluster = require('cluster');
const http = require('http');

const port = Number(process.argv[2]);
const workers = Number(process.argv[3] || 1);

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
    process.exit(0);
  });
} else {
  // Content-Length on every answer, as the posts' servers sent (no chunked framing).
  const send = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  };
  http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/' || url.pathname === '/plaintext') {
      send(res, 200, 'hello, world!');
    } else if (url.pathname === '/sum') {
      let total = 0;
      for (let i = 0; i < 1000; i++) total += 100 + Math.floor(Math.random() * 900);
      send(res, 200, 'sum=' + total);
    } else if (url.pathname === '/sleep') {
      const ms = Number(url.searchParams.get('ms'));
      if (!Number.isInteger(ms) || ms < 0 || ms > 10000) {
        send(res, 400, 'ms must be an integer in 0..=10000\n');
        return;
      }
      // setTimeout: the event loop serves the others meanwhile.
      setTimeout(() => send(res, 200, 'slept=' + ms), ms);
    } else {
      send(res, 404, 'not found\n');
    }
  }).listen(port, process.env.ARCHZOO_PEER_HOST || '127.0.0.1');
  process.on('SIGTERM', () => process.exit(0));
}
