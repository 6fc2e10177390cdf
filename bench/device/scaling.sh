#!/usr/bin/env bash
# bench/device/scaling.sh — the run across cores on the 16-core device (docs/cores.md):
# every event-driven model, nginx and Go net/http at 2, 4 and 8 server cores with wrk on
# cores 8-15, pipelined ×16 (the server's own cost) and without keep-alive (the connection),
# then ab -c 1000 beside wrk -c 1000 at 8 cores (the posts' client). About 4.5 minutes.
# After bench/device/prepare, with the device tool: run `bash .dev/scaling.sh`, carry [".dev"];
# results come back as scaling.tgz (one results/ folder per bench run) and log.txt.
# Rehearse here first: CORES=1 CLIENT=1 DUR=1 OUT=/tmp/s bash .dev/scaling.sh
set -u
OUT=${OUT:-/tmp/scaling-out}
CORES=${CORES:-"2 4 8"}
CLIENT=${CLIENT:-8-15}
DUR=${DUR:-3}
. .dev/setup.sh
pack() { tar czf "$OUT/scaling.tgz" -C "$res" . 2>/dev/null; }
V=prefork-eventloop,prefork-eventloop/reuseport,coroutine-reuseport,thread-per-core,work-stealing,work-stealing/hyper,reactor-workers
P=nginx,go-nethttp
B=".dev/bin/bench --out $res --bin-dir $R/.dev/bin --reps 1 --duration $DUR --client-cpus $CLIENT --workloads plaintext"
t0=$(date +%s)
for mode in "on --pipeline 16" "off"; do
    for n in $CORES; do
        echo "== $(( $(date +%s) - t0 ))s keep-alive $mode, $n cores" >> "$log"
        $B --client wrk --variants $V --peers $P --server-cpus "0-$((n - 1))" --workers "$n" --keepalive $mode -c 256 >> "$log" 2>&1
        pack
    done
done
n=${CORES##* }
for client in ab wrk; do
    echo "== $(( $(date +%s) - t0 ))s $client -c 1000, close, $n cores" >> "$log"
    $B --client $client --variants prefork-eventloop,work-stealing --peers $P --server-cpus "0-$((n - 1))" --workers "$n" --keepalive off -c 1000 >> "$log" 2>&1
    pack
done
echo "== $(( $(date +%s) - t0 ))s done" >> "$log"
