#!/usr/bin/env bash
# forkstorm.sh: how well process-event observers keep up with a fork storm.
#
# Runs scripts/forkstorm/storm.c (W workers forking and reaping children as
# fast as the machine allows) in rounds of four configurations:
#
#   none        the storm unobserved: its rate is the reference
#   supervisor  `supervisor events --json --mechanism M` watching
#   forkstat    `forkstat -e fork,exit` watching (Debian package forkstat)
#   both        both observers watching the same storm at once
#
# For each observed storm it reports:
#   reported  share of the storm's children whose fork (with a storm worker
#             as parent) and exit the observer printed, matched per pid
#             occurrence against the pids the storm recorded (pids are
#             reissued within a long storm; see forkstorm/match.awk)
#   lost      events the observer said it lost (supervisor: the totals on
#             stderr; forkstat does not count losses)
#   missing   storm fork/exit events not printed (2 x children - seen)
#   cs/event  the observer's context switches per event printed (why the
#             CPU goes where it goes)
#   us/event  observer CPU (utime+stime from /proc/PID/stat, from when it was
#             ready until it had drained the storm) divided by the events it
#             printed in that run (all processes of the machine, all kinds)
#   rate      storm rate as a share of the unobserved rate of the same round
# and then the median of each figure over the rounds.
#
# Usage: scripts/forkstorm.sh [--mechanism ebpf|netlink] [--children N]
#          [--rounds R] [--mode vfork|fork] [--workers W]
#          [--configs "supervisor forkstat both"] [--supervisor PATH]
#          [--keep DIR] [--alternate]
#
# --alternate runs the configurations in the opposite order every other
# round, so a drift of the machine's load favours none of them.
#
# Needs root, gcc, go (unless --supervisor), forkstat (unless left out of
# --configs). One round is 4 storms of N children, each 1-7 s of both cores
# at the 15,000-60,000 children a second this VM reaches (docs/benchmarks.md);
# rounds are 5 s apart.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

mech=ebpf
children=60000
rounds=3
mode=vfork
workers=$(nproc)
configs="supervisor forkstat both"
supervisor=""
keep=""
alternate=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
die() { echo "forkstorm: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case "$1" in
	--mechanism) mech=$2; shift 2 ;;
	--children) children=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--mode) mode=$2; shift 2 ;;
	--workers) workers=$2; shift 2 ;;
	--configs) configs=$2; shift 2 ;;
	--supervisor) supervisor=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	--alternate) alternate=1; shift ;;
	-h | --help) usage ;;
	*) echo "forkstorm: unknown argument $1" >&2; usage ;;
	esac
done
case "$mech" in ebpf | netlink) ;; *) die "--mechanism must be ebpf or netlink" ;; esac
case "$mode" in fork | vfork) ;; *) die "--mode must be fork or vfork" ;; esac
[ "$(id -u)" = 0 ] || die "needs root (eBPF, netlink proc connector)"
case " $configs " in *" forkstat "* | *" both "*)
	command -v forkstat >/dev/null || die "forkstat not found (apt-get install forkstat)" ;;
esac

if [ -n "$keep" ]; then
	dir=$keep
	mkdir -p "$dir"
else
	dir=$(mktemp -d /tmp/forkstorm.XXXXXX)
fi
observers=()
cleanup() {
	for p in "${observers[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "$keep" ] || rm -rf "$dir"
}
trap cleanup EXIT

gcc -O2 -Wall -o "$dir/storm" "$here/forkstorm/storm.c"
if [ -z "$supervisor" ]; then
	(cd "$repo" && go build -o "$dir/supervisor" ./cmd/supervisor)
	supervisor=$dir/supervisor
fi
hz=$(getconf CLK_TCK)

# cputicks PID: utime+stime of a process, in clock ticks.
cputicks() {
	local s
	s=$(cat "/proc/$1/stat")
	s=${s##*) } # fields from 3 on; comm may hold spaces
	set -- $s
	echo $((${12} + ${13}))
}

# switches PID: context switches (voluntary and not) of all of a process's
# threads: each is a sleep/wake-up of the observer, the main cost per event
# when it wakes for every few events.
switches() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

# ready_supervisor PID ERRFILE: wait for "mechanism X" on stderr.
ready_supervisor() {
	local i
	for i in $(seq 600); do
		if grep -q "mechanism " "$2" 2>/dev/null; then
			grep -q "mechanism $mech\$" "$2" || die "supervisor chose another mechanism: $(cat "$2")"
			return 0
		fi
		kill -0 "$1" 2>/dev/null || die "supervisor events exited: $(cat "$2")"
		sleep 0.1
	done
	die "supervisor events not ready after 60s"
}

# ready_forkstat PID: forkstat prints nothing to a file until its buffer
# fills; it is ready once it holds a netlink socket and its start-up scan of
# /proc is over (its CPU time stops rising), at most 10 s.
ready_forkstat() {
	local i last=-1 now
	for i in $(seq 100); do
		kill -0 "$1" 2>/dev/null || die "forkstat exited"
		if ls -l "/proc/$1/fd" 2>/dev/null | grep -q 'socket:'; then
			now=$(cputicks "$1")
			[ "$now" = "$last" ] && return 0
			last=$now
		fi
		sleep 0.2
	done
}

# drained PID FILE [PID FILE]: wait until each observer has printed the exit
# of the storm's last workers (the storm's events are then printed, unless
# lost), or has gone quiet: at most 2 clock ticks of CPU in 0.3 s (forkstat
# buffers its output, and a lost exit never comes; the machine's other
# processes keep the output growing), at most 30 s. Uses $wpids.
drained() {
	local i j pending quiet args=("$@") last=() now
	for i in $(seq 100); do
		pending=0
		quiet=1
		for ((j = 0; j < ${#args[@]}; j += 2)); do
			seen_worker_exits "${args[j + 1]}" || pending=1
			now=$(cputicks "${args[j]}")
			[ -n "${last[j]:-}" ] && [ $((now - last[j])) -le 2 ] || quiet=0
			last[j]=$now
		done
		# (a pid reissued to a worker may have exited earlier: linger)
		[ "$pending" = 0 ] && { sleep 0.5; return 0; }
		[ "$quiet" = 1 ] && return 0
		sleep 0.3
	done
	echo "forkstorm: observers still busy 30 s after the storm" >&2
}

# seen_worker_exits FILE: whether FILE (supervisor JSON or forkstat table)
# shows the exit of every worker in $wpids.
seen_worker_exits() {
	local w
	for w in ${wpids//,/ }; do
		grep -q -E "^\{\"kind\":\"exit\",.*\"pid\":$w,|^[0-9:]+ exit +$w " "$1" || return 1
	done
}

# storm TAG: run one storm; sets rate and wpids.
storm() {
	local out
	out=$("$dir/storm" -n "$children" -w "$workers" -m "$mode" -o "$dir/pids.$1")
	echo "$out" >"$dir/storm.$1"
	rate=$(echo "$out" | sed -n 's/.* rate=\([0-9.]*\).*/\1/p')
	wpids=$(echo "$out" | sed -n 's/.* worker_pids=\([0-9,]*\).*/\1/p')
}

results=$dir/results
: >"$results"

# observe ROUND CONFIG: one observed storm; appends a line per observer.
observe() {
	local round=$1 config=$2 tag="$1.$2" spid="" fpid="" s0=0 f0=0 s1 f1
	if [ "$config" = supervisor ] || [ "$config" = both ]; then
		"$supervisor" events --json --mechanism "$mech" >"$dir/sup.$tag" 2>"$dir/sup.$tag.err" &
		spid=$!
		observers+=("$spid")
		ready_supervisor "$spid" "$dir/sup.$tag.err"
	fi
	if [ "$config" = forkstat ] || [ "$config" = both ]; then
		forkstat -e fork,exit >"$dir/fs.$tag" 2>"$dir/fs.$tag.err" &
		fpid=$!
		observers+=("$fpid")
		ready_forkstat "$fpid"
	fi
	local sc0=0 fc0=0
	[ -z "$spid" ] || { s0=$(cputicks "$spid"); sc0=$(switches "$spid"); }
	[ -z "$fpid" ] || { f0=$(cputicks "$fpid"); fc0=$(switches "$fpid"); }
	storm "$tag"
	local watch=()
	[ -z "$spid" ] || watch+=("$spid" "$dir/sup.$tag")
	[ -z "$fpid" ] || watch+=("$fpid" "$dir/fs.$tag")
	drained "${watch[@]}"
	if [ -n "$spid" ]; then
		s1=$(cputicks "$spid")
		local sc1
		sc1=$(switches "$spid")
		kill -INT "$spid"
		wait "$spid" || die "supervisor events exited with $?: $(cat "$dir/sup.$tag.err")"
		local m lost
		m=$(awk -v fmt=supervisor -v workers="$wpids" -f "$here/forkstorm/match.awk" "$dir/pids.$tag" "$dir/sup.$tag")
		# The totals line is the authority on losses.
		lost=$(sed -n 's/.* events, \([0-9]*\) lost.*/\1/p' "$dir/sup.$tag.err")
		echo "round=$round config=$config observer=supervisor/$mech rate=$rate base=$base cpu=$((s1 - s0)) cs=$((sc1 - sc0)) $m stderr_lost=${lost:-?}" >>"$results"
	fi
	if [ -n "$fpid" ]; then
		f1=$(cputicks "$fpid")
		local fc1
		fc1=$(switches "$fpid")
		kill -INT "$fpid"
		wait "$fpid" || true # forkstat exits non-zero on a signal in some versions
		local m
		m=$(awk -v fmt=forkstat -v workers="$wpids" -f "$here/forkstorm/match.awk" "$dir/pids.$tag" "$dir/fs.$tag")
		echo "round=$round config=$config observer=forkstat rate=$rate base=$base cpu=$((f1 - f0)) cs=$((fc1 - fc0)) $m stderr_lost=-" >>"$results"
	fi
	observers=()
}

echo "# forkstorm: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -r) nproc=$(nproc) children=$children workers=$workers mode=$mode mechanism=$mech rounds=$rounds"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
	storm "$round.none"
	base=$rate
	echo "round=$round config=none observer=- rate=$rate base=$rate" >>"$results"
	order=$configs
	if [ -n "$alternate" ] && [ $((round % 2)) = 0 ]; then
		order=$(echo $configs | tr ' ' '\n' | tac | tr '\n' ' ')
	fi
	for config in $order; do
		observe "$round" "$config"
	done
	[ "$round" = "$rounds" ] || sleep 5 # leave the cores to others for a moment
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Per-run rows and medians per (config, observer).
awk -v hz="$hz" '
function kv(line,   i, n, f, p) {
	delete v
	n = split(line, f, " ")
	for (i = 1; i <= n; i++) { p = index(f[i], "="); v[substr(f[i], 1, p - 1)] = substr(f[i], p + 1) }
}
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
BEGIN {
	printf "%-5s %-10s %-18s %9s %9s %8s %7s %7s %9s %9s %7s\n", "round", "config", "observer", "storm/s", "reported", "lost", "missing", "paired", "us/event", "cs/event", "rate"
}
{
	kv($0)
	if (v["config"] == "none") {
		printf "%-5s %-10s %-18s %9.0f %9s %8s %7s %7s %9s %9s %7s\n", v["round"], "none", "-", v["rate"], "-", "-", "-", "-", "-", "-", "100.0%"
		base[++nb] = v["rate"]
		next
	}
	rep = 100 * v["reported"] / v["children"]
	miss = 2 * v["children"] - v["forked"] - v["exited"]
	us = (v["events"] > 0) ? 1e6 * v["cpu"] / hz / v["events"] : 0
	cs = (v["events"] > 0) ? v["cs"] / v["events"] : 0
	rel = 100 * v["rate"] / v["base"]
	paired = (v["paired"] < 0) ? "-" : sprintf("%.2f%%", 100 * v["paired"] / v["children"])
	lost = (v["stderr_lost"] == "-") ? "n/a" : v["stderr_lost"]
	printf "%-5s %-10s %-18s %9.0f %8.2f%% %8s %7d %7s %9.2f %9.3f %6.1f%%\n", v["round"], v["config"], v["observer"], v["rate"], rep, lost, miss, paired, us, cs, rel
	k = v["config"] " " v["observer"]
	if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	R[k] = R[k] " " rep; L[k] = L[k] " " ((lost == "n/a") ? 0 : lost); M[k] = M[k] " " miss
	U[k] = U[k] " " us; C[k] = C[k] " " cs; Q[k] = Q[k] " " rel; S[k] = S[k] " " v["rate"]
	if (miss > 0 && (lost == "n/a" || lost + 0 < miss)) unexplained[k] += miss - ((lost == "n/a") ? 0 : lost)
}
END {
	b = ""
	for (i = 1; i <= nb; i++) b = b " " base[i]
	printf "\nmedians over %d rounds (unobserved storm: %.0f children/s)\n", nb, median(b)
	printf "%-10s %-18s %9s %9s %8s %7s %9s %9s %7s  %s\n", "config", "observer", "storm/s", "reported", "lost", "missing", "us/event", "cs/event", "rate", "losses unreported"
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, c, " ")
		ml = (c[2] == "forkstat") ? "n/a" : median(L[k])
		printf "%-10s %-18s %9.0f %8.2f%% %8s %7d %9.2f %9.3f %6.1f%%  %d\n", c[1], c[2], median(S[k]), median(R[k]), ml, median(M[k]), median(U[k]), median(C[k]), median(Q[k]), unexplained[k]
	}
}' "$results"
[ -z "$keep" ] || echo "# raw results and observer output kept in $dir"
