#!/usr/bin/env bash
# sidebyside.sh: compare builds of the supervisor by running one daemon of
# each at once, all watching the same exec storms.
#
# scripts/execstorm.sh runs its observers one after another, and on a
# shared VM the host's load moves between runs: one build's few-args rows
# spread over 6.9-11.5 µs per exec in four runs, and the second run of a
# pair paid for the first's feed being written back. Daemons watching the
# same storms at the same time meet the same host. Each one runs as
# `supervisor run --mechanism ebpf --log-process-events` with its ECS feed
# written to a file of its own; the storms are scripts/execstorm/storm.c
# exec'ing scripts/execstorm/target.c, one worker per CPU, alternately with
# a few arguments and with 4 KiB of them, after a 4 KiB warm-up of 1,200
# execs that is not measured.
#
# The daemons are started, warmed up and stopped once per build, each time
# in another order (rotated), and each time watch ROUNDS rounds of both
# storms: every build is measured in every position. For each round and
# storm it prints each daemon's CPU per storm exec, in
# µs: the run time of all its threads (user and system, from
# /proc/PID/task/*/schedstat) over the storm and the 2.5 s after it, in
# which the daemon drains its ring and writes its batch. The last lines
# are the medians over the rounds.
#
# Calibrate first: the same build twice (`sidebyside.sh B B`) shows what
# the method cannot resolve on the host of the day (here: single rounds
# differed by up to 20%, medians of 4 rounds by a few percent). The daemons
# share the cores with each other and with the storm, so the figures are
# higher than a lone daemon's; compare builds with each other, not with
# execstorm.sh's rows.
#
# With --quiet the daemons run on their defaults instead (no process
# lines, so no arguments or paths captured): the cost of watching lineage
# alone, execstorm.sh's daemon-quiet.
#
# Usage: scripts/sidebyside.sh [--quiet] [--rounds R] [--execs N] BUILD BUILD...
#   R rounds (default 2) for each of the orders, so R times the number of
#   builds in all.
#   BUILD is a path to a supervisor binary, or a git revision to build.
#
# Needs root and gcc; go to build revisions. Everything it starts is
# stopped on exit, and its temporary directory removed.
set -euo pipefail

rounds=2 execs=5000 quiet=
while [ $# -gt 0 ]; do
	case $1 in
	--quiet) quiet=1; shift ;;
	--rounds) rounds=$2; shift 2 ;;
	--execs) execs=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "sidebyside.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { echo "sidebyside.sh: give two builds or more" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "sidebyside.sh: needs root (eBPF)" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
dir=$(mktemp -d /tmp/sidebyside.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
	git -C "$repo" worktree prune 2>/dev/null || true
}
trap cleanup EXIT

mkdir -p "$dir/bin"
gcc -O2 -Wall -o "$dir/bin/storm" "$here/execstorm/storm.c"
gcc -O2 -Wall -static -nostdlib -fno-stack-protector -o "$dir/bin/t" "$here/execstorm/target.c"

# The builds: a path as it is, a revision built from a worktree of it.
bins=() names=()
i=0
for b in "$@"; do
	if [ -x "$b" ] && [ -f "$b" ]; then
		bins+=("$b")
	else
		rev=$(git -C "$repo" rev-parse --verify --quiet "$b^{commit}") ||
			{ echo "sidebyside.sh: $b is neither a binary nor a revision" >&2; exit 2; }
		git -C "$repo" worktree add -q --detach "$dir/src$i" "$rev"
		(cd "$dir/src$i" && go build -o "$dir/bin/supervisor$i" ./cmd/supervisor)
		git -C "$repo" worktree remove --force "$dir/src$i"
		bins+=("$dir/bin/supervisor$i")
	fi
	i=$((i + 1))
	names+=("$i:$(basename "$b")")
done

# cpu PID: the run time of all the process's threads, in ns.
cpu() {
	local sum=0 run _
	for f in /proc/"$1"/task/*/schedstat; do
		read -r run _ <"$f" || continue
		sum=$((sum + run))
	done
	echo "$sum"
}

# start ORDER...: a daemon of each build (indexes into bins), in that
# order; pids[j] is then build order[j]'s.
start() {
	pids=()
	local j
	for j in "$@"; do
		rm -rf "$dir/d$j"
		mkdir -p "$dir/d$j"
		local feed=(--log-output "file:$dir/d$j/feed.json" --log-process-events)
		[ -z "$quiet" ] || feed=()
		"${bins[$j]}" run --state-dir "$dir/d$j" --socket "$dir/d$j/api.sock" --cgroup off \
			--mechanism ebpf "${feed[@]}" >/dev/null 2>"$dir/d$j/err" &
		pids+=("$!")
	done
	local k=0
	for j in "$@"; do
		for _ in $(seq 100); do
			grep -q "serving on" "$dir/d$j/err" && break
			kill -0 "${pids[$k]}" 2>/dev/null || { echo "daemon ${names[$j]} exited: $(cat "$dir/d$j/err")" >&2; exit 1; }
			sleep 0.1
		done
		grep -q "serving on" "$dir/d$j/err" || { echo "daemon ${names[$j]} did not start" >&2; exit 1; }
		k=$((k + 1))
	done
	"$dir/bin/storm" -t "$dir/bin/t" -p warm -n 1200 -k 4k >/dev/null
	sleep 3
}

stop() {
	kill "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
}

n=${#bins[@]}
printf '%-6s %-6s' round storm
for nm in "${names[@]}"; do printf ' %14s' "$nm"; done
echo
declare -A rows
round=0
for pass in $(seq 0 $((n - 1))); do
	# Each pass starts the daemons in another order (rotated by one):
	# the first daemon started measured up to 10% cheaper than the
	# second with the same build.
	order=()
	for j in $(seq 0 $((n - 1))); do order+=($(((j + pass) % n))); done
	start "${order[@]}"
	for _ in $(seq "$rounds"); do
		round=$((round + 1))
		for k in small 4k; do
			before=()
			for p in "${pids[@]}"; do before+=("$(cpu "$p")"); done
			"$dir/bin/storm" -t "$dir/bin/t" -p "r$round$k" -n "$execs" -k "$k" >/dev/null
			sleep 2.5
			declare -A us=()
			for idx in "${!order[@]}"; do
				us[${order[$idx]}]=$(awk -v a="${before[$idx]}" -v b="$(cpu "${pids[$idx]}")" -v n="$execs" \
					'BEGIN { printf "%.2f", (b - a) / n / 1000 }')
			done
			printf '%-6s %-6s' "$round" "$k"
			for j in $(seq 0 $((n - 1))); do
				rows[$k.$j]="${rows[$k.$j]:-} ${us[$j]}"
				printf ' %14s' "${us[$j]}"
			done
			echo
		done
	done
	stop
done
for k in small 4k; do
	printf '%-6s %-6s' median "$k"
	for j in $(seq 0 $((n - 1))); do
		printf ' %14s' "$(echo "${rows[$k.$j]}" | tr ' ' '\n' | sed '/^$/d' | sort -g |
			awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
	done
	echo
done
