#!/usr/bin/env bash
# The daemon's CPU while teardowns wait out their grace: N grants whose
# processes ignore SIGTERM are released with an hour's grace (the clients
# leave at once; the teardowns go on), and the daemon's user+system time
# is read over 10 s of those graces. Give one binary, or two to compare
# them side by side (each run on a daemon of its own, one after the other).
# Usage (as root): scripts/grace-cpu.sh N BIN [BIN2]
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
n=$1
shift
hz=$(getconf CLK_TCK)
for bin in "$@"; do
	d=$(mktemp -d /tmp/grace-cpu.XXXXXX)
	"$bin" run --state-dir "$d/state" --socket "$d/api.sock" --log-output "file:$d/log.json" >/dev/null 2>&1 &
	dpid=$!
	export SUPERVISOR_SOCKET=$d/api.sock
	for _ in $(seq 100); do [ -S "$d/api.sock" ] && break; sleep 0.1; done
	ids=()
	for _ in $(seq "$n"); do
		ids+=("$("$bin" launch -- sh -c 'trap "" TERM; exec sleep 10000' | cut -d' ' -f1)")
	done
	rel=()
	for id in "${ids[@]}"; do
		(timeout 2 "$bin" release --grace 1h "$id" >/dev/null 2>&1 || true) &
		rel+=($!)
	done
	wait "${rel[@]}"
	sleep 2
	t0=$(awk '{print $14+$15}' "/proc/$dpid/stat")
	sleep 10
	t1=$(awk '{print $14+$15}' "/proc/$dpid/stat")
	echo "$bin: $n teardowns in their grace: $(((t1 - t0) * 1000 / hz)) ms of daemon CPU in 10 s"
	kill "$dpid"
	wait "$dpid" 2>/dev/null || true
	# The daemon leaves its workloads running when it stops.
	pkill -KILL -f '^sleep 10000$' || true
	rm -rf "$d"
done
