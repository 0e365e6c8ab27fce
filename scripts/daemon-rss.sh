#!/usr/bin/env bash
# Measures the daemon's resident memory idle and while it tracks N extra
# live processes (default 10000). Needs root. Usage: scripts/daemon-rss.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
work=$(mktemp -d)
trap 'kill -TERM $dpid 2>/dev/null || true; kill -KILL -$spid 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/supervisor" ./cmd/supervisor

rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
serve() {
	"$work/supervisor" run --state-dir "$work/state" --socket "$work/s.sock" --log-output "file:$work/log.json" &
	dpid=$!
	for _ in $(seq 100); do
		SUPERVISOR_SOCKET="$work/s.sock" "$work/supervisor" status >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "daemon did not start" >&2; exit 1
}

serve
sleep 2
idle=$(rss $dpid)
live=$(SUPERVISOR_SOCKET="$work/s.sock" "$work/supervisor" status --json | sed -n 's/.*"graph_live": *\([0-9]*\).*/\1/p')
kill -TERM $dpid; wait $dpid || true

# N idle processes in their own group, then a fresh daemon that scans them.
setsid bash -c "for i in \$(seq $n); do sleep 3600 & done; wait" &
spid=$!
while [ "$(pgrep -c -s $spid || true)" -lt "$n" ]; do sleep 0.5; done
serve
sleep 2
busy=$(rss $dpid)
blive=$(SUPERVISOR_SOCKET="$work/s.sock" "$work/supervisor" status --json | sed -n 's/.*"graph_live": *\([0-9]*\).*/\1/p')
printf 'daemon RSS idle: %d KiB (graph holds %s live processes)\n' "$idle" "$live"
printf 'daemon RSS with %d more processes: %d KiB (graph holds %s live processes)\n' "$n" "$busy" "$blive"
