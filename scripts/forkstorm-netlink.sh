#!/usr/bin/env bash
# forkstorm-netlink.sh: the netlink source against forkstat in the same
# fork storms, alone and under contention.
#
# Runs scripts/forkstorm.sh --mechanism netlink --configs "supervisor
# forkstat" twice in one go:
#
#   alone      nothing else watching, the cores otherwise idle
#   contended  two other proc connector listeners (`supervisor events
#              --mechanism netlink`, output discarded) running, and one
#              core kept busy by a shell loop, for the whole second run
#
# Each row reports, per observer: the storm children whose fork and exit it
# printed (reported), the losses it reported (lost; forkstat counts none),
# the storm events it missed (missing), CPU per event printed (us/event)
# and the storm's rate as a share of the unobserved storm (rate); see
# forkstorm.sh. The supervisor's output holds fork, exec and exit events
# as JSON lines with pid, ppid and tokens; forkstat's (-e fork,exit) its
# table of fork parent/child and exit lines with comm and duration.
#
# Usage: scripts/forkstorm-netlink.sh [--children N] [--rounds R]
#          [--mode vfork|fork] [--supervisor PATH]
# Defaults: 30,000 children, 3 rounds, vfork, 2 workers.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
children=30000
rounds=3
mode=vfork
supervisor=""
while [ $# -gt 0 ]; do
	case "$1" in
	--children) children=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--mode) mode=$2; shift 2 ;;
	--supervisor) supervisor=$2; shift 2 ;;
	*) echo "forkstorm-netlink: unknown argument $1" >&2; exit 64 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "forkstorm-netlink: needs root" >&2; exit 1; }
if [ -z "$supervisor" ]; then
	supervisor=$(mktemp -d /tmp/forkstorm-netlink.XXXXXX)/supervisor
	(cd "$repo" && go build -o "$supervisor" ./cmd/supervisor)
fi

run() {
	"$here/forkstorm.sh" --mechanism netlink --configs "supervisor forkstat" \
		--children "$children" --rounds "$rounds" --mode "$mode" --workers 2 \
		--supervisor "$supervisor"
}

echo "## alone"
run

echo
echo "## contended: two other netlink listeners, one core busy"
load=()
stop_load() { for p in "${load[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop_load EXIT
for _ in 1 2; do
	"$supervisor" events --json --mechanism netlink >/dev/null 2>&1 &
	load+=($!)
done
sh -c 'while :; do :; done' &
load+=($!)
run
