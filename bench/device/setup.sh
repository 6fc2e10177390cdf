# bench/device/setup.sh — sourced by the device run scripts (scaling.sh, connection.sh) from
# the repository root, with $OUT set: puts .dev/'s tools first on the path, gives the harness
# the paths it was built at, empties .dev/res ($res) and writes $OUT/machine.txt; $log is
# $OUT/log.txt.
R=$PWD
mkdir -p "$OUT"
export PATH=$R/.dev/bin:$PATH LD_LIBRARY_PATH=$R/.dev/lib ARCHZOO_PEERS_BUILD=$R/.dev/peers
# The harness finds peers/ and bench/ through the path it was built at.
mkdir -p /work /var/log/nginx /var/lib/nginx
[ -e /work/main ] || ln -s "$R" /work/main
res=$R/.dev/res
rm -rf "$res"
log=$OUT/log.txt
{ date; nproc; lscpu | grep -v '^Flags'; uname -a; head -2 /etc/os-release; ulimit -n
  wrk -v 2>&1 | head -1; nginx -v 2>&1; sysctl net.ipv4.ip_local_port_range net.ipv4.tcp_tw_reuse; } > "$OUT/machine.txt" 2>&1
