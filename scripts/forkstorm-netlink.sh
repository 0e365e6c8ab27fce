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
# forkstorm.sh. For the supervisor, paired is the share of storm children
# whose fork and exit carry one proven token: under netlink, the children
# whose fork was read while they were still there. Configurations run in the opposite order every other round,
# so a drift of the machine's load favours neither observer. After each
# run, one line per round compares the two: CPU per event and storm rate of
# the supervisor as a multiple of forkstat's. Last, the time from one
# SIGINT to the exit of `supervisor events --mechanism netlink` is measured
# on a quiet machine (no storm).
#
# What each compared output contains (both observe the same storm):
#   supervisor  one JSON object per fork, exec and exit of every process on
#               the host (kind, pid, ppid, token, parent_token, comm,
#               exit_code/signal), and one per loss (count); a token is
#               proven through a pidfd and /proc when the process is still
#               there to read (see the README's netlink section), else null
#   forkstat    (-e fork,exit) one table line per fork (parent and child
#               lines, each with pid and command line read from /proc) and
#               per exit (pid, exit code, duration, command); no identity
#               beyond the pid, and no record of what it dropped
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
		--supervisor "$supervisor" --alternate | tee "$out"
	# Per round: the supervisor against forkstat in the same round.
	awk '$1 ~ /^[0-9]+$/ && $2 == "supervisor" { su[$1] = $9; sr[$1] = $4; rp[$1] = $5; lo[$1] = $6; pa[$1] = $8 }
	     $1 ~ /^[0-9]+$/ && $2 == "forkstat" { fu[$1] = $9; fr[$1] = $4; fp[$1] = $5 }
	     END { for (r in su) if (r in fu && fu[r] > 0 && fr[r] > 0)
	             printf "round %s: supervisor reported %s (lost %s, paired by token %s), forkstat %s; CPU per event %.2fx forkstat (%s vs %s us); storm rate %.2fx forkstat (%s vs %s/s)\n",
	                    r, rp[r], lo[r], pa[r], fp[r], su[r] / fu[r], su[r], fu[r], sr[r] / fr[r], sr[r], fr[r] }' "$out" | sort -n -k2
}
out=$(mktemp /tmp/forkstorm-netlink.out.XXXXXX)

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
stop_load
load=()

# stop: one SIGINT, no storm; milliseconds until the process has exited.
echo
echo "## stop: SIGINT to supervisor events --mechanism netlink on a quiet machine"
for i in 1 2 3 4 5; do
	err=$(mktemp /tmp/forkstorm-netlink.err.XXXXXX)
	"$supervisor" events --json --mechanism netlink >/dev/null 2>"$err" &
	p=$!
	until grep -q "mechanism " "$err"; do sleep 0.1; done
	sleep 1
	t0=$(date +%s%N)
	kill -INT "$p"
	wait "$p"
	t1=$(date +%s%N)
	echo "stop $i: $(( (t1 - t0) / 1000 )) us"
	rm -f "$err"
done
rm -f "$out"
