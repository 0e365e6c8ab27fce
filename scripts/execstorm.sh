#!/usr/bin/env bash
# execstorm.sh: exec storms watched by process observers, side by side.
#
# Runs scripts/execstorm/storm.c (one worker per CPU forking, exec'ing and
# reaping a tiny static binary, scripts/execstorm/target.c) in two storms of
# N execs each, every exec with a unique argv (a counter):
#
#   small  TARGET PREFIX-i -a --flag=value xyz
#   4k     TARGET PREFIX-i and 32 arguments of 127 bytes (4 KiB)
#
# For each observer in turn, both storms are first run unobserved (the
# reference rate, right before), then watched by it:
#
#   events    `supervisor events --json --mechanism ebpf` writing to a file
#   daemon    `supervisor run --mechanism ebpf --log-process-events` with its
#             ECS log feed written to a file
#   daemon-exec  the same daemon with `--log-process-events=exec`: its feed
#             writes exec lines only (the volume of an auditd execve rule),
#             and forks and exits cost it no encoding or write
#   daemon-null  the daemon as `daemon`, its feed written to /dev/null
#             (--log-output stdout): the same encoding and write calls
#             without the page cache, so the difference from `daemon` is
#             what the kernel charged for putting the lines in a file. It
#             reports no execs (reported 0%)
#   daemon-quiet  the daemon on its defaults (`--log-process-events=false`):
#             no process lines, so its exec program captures no arguments
#             or paths (skip_blobs in bpf/process.bpf.c). It reports no
#             execs (reported 0%): the row is the cost of watching lineage
#             alone
#   auditd    auditd (installed with apt-get if missing, run with its own
#             config in a temporary directory) with the rule
#             `auditctl -a always,exit -F arch=b64 -S execve`
#   bpftrace  the one-liner
#             tracepoint:syscalls:sys_enter_execve { join(args->argv); }
#             (needs tracefs: mounted for it if it is not, and unmounted)
#
# For each observer and storm it reports:
#   rate      the storm's execs a second as a share of the unobserved rate
#   storm     the storm's own CPU per exec (its workers and children, user
#             and system), unobserved -> observed: what an observer costs
#             in the exec'ing processes (probes, audit records), less
#             disturbed than the rate when other work shares the cores
#   reported  storm execs the observer reported (unique counters seen)
#   exact     storm execs reported with their complete and exact argv
#   lost      events the observer said it lost (supervisor: its totals;
#             auditd: the kernel's lost counter; bpftrace: "Lost N events")
#   cpu/exec  observer CPU (the run time of all its threads, user and
#             system, from /proc/PID/task/*/schedstat, from the
#             storm's start until the observer has drained it; for auditd
#             with the kauditd kernel thread) divided by the storm's execs.
#             The observer also handles everything else the machine runs
#             meanwhile, and the supervisor its forks and exits.
#   probe     from the kernel's BPF statistics (kernel.bpf_stats_enabled,
#             set for the run and restored): the observer's exec program
#             (supervisor: handle_exec; bpftrace: its execve program) run
#             time per run, and all its programs' run time per storm exec
#   out/exec  bytes the observer wrote to its output file (and the files
#             it rotated to) per storm exec
#
# With --warmup W, each observer first watches a 4k storm of W execs that
# is not measured, then the cores rest 2 s: the rows are then a running
# observer's cost, without what it pays once after its start (the
# supervisor's ring buffer and feed batches written for the first time,
# its heap grown; on a host where a first write to a page costs tens of µs
# that is most of a fresh daemon's first storm). 1,000 execs of 4 KiB lap
# the daemon's 4 MiB ring. Without it (the default) the rows are a freshly
# started observer's first two storms.
#
# With --rounds R all of it runs R times, and the table ends with the median
# of each figure over the rounds (other work shares the cores: one round's
# rates are noisy).
#
# Usage: scripts/execstorm.sh [--execs N] [--rounds R] [--observers "events daemon daemon-exec daemon-null daemon-quiet auditd bpftrace"]
#          [--warmup W] [--supervisor PATH] [--keep DIR]
#
# Needs root, gcc, go (unless --supervisor), jq and bpftool (installed with
# apt-get when missing, like auditd and bpftrace). Everything it changes
# (the audit rule, backlog limit and enabled flag, auditd, tracefs, the BPF
# statistics sysctl) is put back on exit, and its observers stopped.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

execs=10000
rounds=1
warmup=0
observers="events daemon auditd bpftrace"
supervisor=""
keep=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64; }
die() { echo "execstorm: $*" >&2; exit 1; }
note() { echo "# $*"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--execs) execs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--observers) observers=$2; shift 2 ;;
	--supervisor) supervisor=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "execstorm: unknown argument $1" >&2; usage ;;
	esac
done
[ "$(id -u)" = 0 ] || die "needs root (eBPF, audit, tracefs)"
[ "$(uname -m)" = x86_64 ] || [ "$(uname -m)" = aarch64 ] || die "target.c knows x86-64 and arm64 only"

if [ -n "$keep" ]; then
	dir=$keep
	mkdir -p "$dir"
else
	dir=$(mktemp -d /tmp/execstorm.XXXXXX)
fi

# What cleanup puts back.
running=()           # observer pids to stop
audit_rule=""        # the rule added, to delete
audit_enabled=""     # the audit enabled flag before
audit_backlog=""     # the backlog limit before
tracefs_mounted=""   # where this script mounted tracefs
stats_before=$(sysctl -n kernel.bpf_stats_enabled)

cleanup() {
	local p
	for p in "${running[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${running[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$audit_rule" ] || auditctl -d $audit_rule >/dev/null 2>&1 || true
	[ -z "$audit_backlog" ] || auditctl -b "$audit_backlog" >/dev/null 2>&1 || true
	[ -z "$audit_enabled" ] || auditctl -e "$audit_enabled" >/dev/null 2>&1 || true
	[ -z "$tracefs_mounted" ] || umount "$tracefs_mounted" 2>/dev/null || true
	sysctl -q -w kernel.bpf_stats_enabled="$stats_before" || true
	[ -n "$keep" ] || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# need CMD PACKAGE: install PACKAGE from Debian when CMD is missing.
apt_updated=""
need() {
	command -v "$1" >/dev/null && return 0
	if [ -z "$apt_updated" ]; then
		apt-get update -qq >/dev/null 2>&1 || true
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >"$dir/apt.$2.log" 2>&1 || return 1
	command -v "$1" >/dev/null
}

need jq jq || die "cannot install jq"
need bpftool bpftool || die "cannot install bpftool"
case " $observers " in *" auditd "*)
	need auditd auditd || die "cannot install auditd"
	# A running audit daemon (the system's) is left alone: skip.
	if [ "$(auditctl -s | awk '$1 == "pid" { print $2 }')" != 0 ]; then
		note "auditd: an audit daemon already runs here; skipped"
		observers=${observers//auditd/}
	fi ;;
esac
case " $observers " in *" bpftrace "*)
	if ! need bpftrace bpftrace; then
		note "bpftrace: not installable from apt here; skipped"
		observers=${observers//bpftrace/}
	fi ;;
esac

mkdir -p "$dir/bin"
gcc -O2 -Wall -o "$dir/bin/storm" "$here/execstorm/storm.c"
gcc -O2 -Wall -static -nostdlib -fno-stack-protector -o "$dir/bin/t" "$here/execstorm/target.c"
target=$dir/bin/t
if [ -z "$supervisor" ]; then
	(cd "$repo" && go build -o "$dir/bin/supervisor" ./cmd/supervisor)
	supervisor=$dir/bin/supervisor
fi
sysctl -q -w kernel.bpf_stats_enabled=1

# cputicks PID...: utime+stime of the processes (all their threads), in
# clock ticks.
cputicks() {
	local p s t=0
	for p in "$@"; do
		s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
		s=${s##*) } # fields from 3 on; comm may hold spaces
		set -- $s
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}

# cpuns PID...: the CPU time the processes' threads have run (user and
# system, from /proc/PID/task/*/schedstat), in ns: clock ticks are 10 ms,
# a tenth of what an observer spends on a storm.
cpuns() {
	local p f t=0 run rest
	for p in "$@"; do
		for f in /proc/"$p"/task/*/schedstat; do
			read -r run rest <"$f" 2>/dev/null || continue
			t=$((t + run))
		done
	done
	echo "$t"
}

# progs PID: ids of the BPF programs PID holds (program and link fds).
progs() {
	local fd
	for fd in /proc/"$1"/fd/*; do
		case "$(readlink "$fd" 2>/dev/null)" in
		anon_inode:bpf-prog | anon_inode:bpf_link)
			sed -n 's/^prog_id:[[:space:]]*//p' "/proc/$1/fdinfo/${fd##*/}" 2>/dev/null ;;
		esac
	done | sort -un | tr '\n' ' '
}

# bpfstat NAMEPATTERN IDS...: "exec_ns exec_cnt all_ns" summed over the
# programs: exec_* over those whose name matches NAMEPATTERN.
bpfstat() {
	local pat=$1 id
	shift
	for id in "$@"; do bpftool prog show id "$id" --json 2>/dev/null || true; done |
		jq -s -r --arg pat "$pat" '
			[.[] | select(.run_time_ns != null)] as $p
			| [([$p[] | select(.name | test($pat)) | .run_time_ns] | add // 0),
			   ([$p[] | select(.name | test($pat)) | .run_cnt] | add // 0),
			   ([$p[] | .run_time_ns] | add // 0)] | @tsv'
}

# drained PID...: wait until the observers have gone quiet (at most 2 clock
# ticks of CPU in 0.3 s, twice in a row), at most 60 s: they have written
# what they will of the storm.
drained() {
	local i last now quiet=0
	last=$(cputicks "$@")
	for i in $(seq 200); do
		sleep 0.3
		now=$(cputicks "$@")
		if [ $((now - last)) -le 2 ]; then
			quiet=$((quiet + 1))
			[ "$quiet" -ge 2 ] && return 0
		else
			quiet=0
		fi
		last=$now
	done
	echo "execstorm: observers still busy 60 s after the storm" >&2
}

# outbytes: the bytes in the observer's output file ($out) and the files
# it rotated to ($out.1 ...); 0 for an output that is not a file.
outbytes() {
	local f t=0
	for f in "$out"*; do
		[ -f "$f" ] && t=$((t + $(stat -c %s "$f")))
	done
	echo "$t"
}

# storm KIND PREFIX: run one storm; sets rate and scpu (its CPU per exec).
storm() {
	local out
	out=$("$dir/bin/storm" -t "$target" -p "$2" -n "$execs" -k "$1") || die "storm failed: $out"
	rate=$(echo "$out" | sed -n 's/.* rate=\([0-9.]*\).*/\1/p')
	scpu=$(echo "$out" | sed -n 's/.* cpu=\([0-9.]*\).*/\1/p')
}

# check KIND PREFIX FILE: count the storm's execs in FILE (one reported
# exec a line, its arguments separated by \037): "reported exact".
check() {
	awk -v kind="$1" -v prefix="$2" -v n="$execs" -v target="$target" -F '\037' '
	BEGIN {
		for (j = 0; j < 32; j++) {
			s = sprintf("%c", 97 + j % 26)
			while (length(s) < 127) s = s s
			big[j] = substr(s, 1, 127)
		}
	}
	{
		if (substr($2, 1, length(prefix) + 1) != prefix "-") next
		i = substr($2, length(prefix) + 2)
		if (i !~ /^[0-9]+$/ || i + 0 >= n) next
		seen[i] = 1
		ok = ($1 == target)
		if (kind == "small")
			ok = ok && NF == 5 && $3 == "-a" && $4 == "--flag=value" && $5 == "xyz"
		else {
			ok = ok && NF == 34
			for (j = 0; ok && j < 32; j++) ok = ($(3 + j) == big[j])
		}
		if (ok) exact[i] = 1
	}
	END { r = 0; e = 0; for (i in seen) r++; for (i in exact) e++; print r, e }' "$3"
}

# args_events FILE, args_daemon FILE (and args_daemon-exec; args_daemon-quiet
# reports none), args_auditd FILE, args_bpftrace FILE:
# each exec the observer reported, as one line of \037-separated arguments.
args_events() {
	jq -R -r 'fromjson? | select(.kind == "exec") | (.argv // []) | join("\u001f")' "$1"
}
# The feed rotates its file at 100 MiB (FILE.1 ... FILE.5): read them all.
args_daemon() {
	jq -R -r 'fromjson? | select(.event.action == "process_exec") | (.process.args // []) | join("\u001f")' "$1"*
}
args_daemon-exec() { args_daemon "$@"; }
args_daemon-quiet() { :; }
args_daemon-null() { :; }
args_bpftrace() {
	tr ' ' '\037' <"$1"
}
# An EXECVE record holds argc and a0..aN, each "quoted" or in hex when it
# has bytes outside printable ASCII; a long argument is split as aN_len=L
# aN[0]=... aN[1]=... possibly over several records of the same event
# (msg=audit(TIME:SERIAL)).
args_auditd() {
	awk '
	BEGIN { for (i = 0; i < 256; i++) hex[sprintf("%02X", i)] = sprintf("%c", i) }
	function val(v,   out, k) {
		if (substr(v, 1, 1) == "\"") return substr(v, 2, length(v) - 2)
		out = ""
		for (k = 1; k < length(v); k += 2) out = out hex[toupper(substr(v, k, 2))]
		return out
	}
	/^type=EXECVE / {
		match($0, /msg=audit\([0-9.]+:[0-9]+\)/)
		ev = substr($0, RSTART, RLENGTH)
		if (!(ev in argc)) order[++nev] = ev
		for (f = 3; f <= NF; f++) {
			p = index($f, "=")
			k = substr($f, 1, p - 1); v = substr($f, p + 1)
			if (k == "argc") { argc[ev] = v + 0; continue }
			if (k ~ /_len$/) continue
			sub(/\[[0-9]+\]$/, "", k)
			a[ev, substr(k, 2)] = a[ev, substr(k, 2)] val(v)
		}
	}
	END {
		for (e = 1; e <= nev; e++) {
			ev = order[e]; line = ""
			for (i = 0; i < argc[ev]; i++) line = line (i ? "\037" : "") a[ev, i]
			print line
		}
	}' "$1"
}

results=$dir/results
: >"$results"

# record OBSERVER KIND BASE RATE REPORTED_EXACT LOST CPU_NS BPF0 BPF1 BASECPU SCPU OUT_BYTES
record() {
	local o=$1 k=$2 base=$3 r=$4 re=$5 lost=$6 cpu=$7 b0=$8 b1=$9 bc=${10} sc=${11} ob=${12}
	echo "round=$round observer=$o storm=$k base=$base rate=$r reported=${re% *} exact=${re#* } lost=$lost cpu=$cpu bpf0=$b0 bpf1=$b1 basecpu=$bc scpu=$sc out=$ob" >>"$results"
}

# await_ready PATTERN FILE NAME: wait up to 60 s until the observer
# ($opids) writes PATTERN to FILE; die if it exits or never does.
await_ready() {
	local i
	for i in $(seq 600); do
		grep -q "$1" "$2" 2>/dev/null && return 0
		kill -0 "$opids" 2>/dev/null || die "$3 exited: $(cat "$2")"
		sleep 0.1
	done
	die "$3 not ready: $(cat "$2")"
}

# start_OBSERVER: start it, wait until it watches; sets opids (its
# processes), oprog (pattern of its exec program's name) and out (its
# output file).
start_events() {
	out=$dir/$round.events.json
	rm -f "$dir/$round.events.err" # a kept directory's old file would pass await_ready
	"$supervisor" events --json --mechanism ebpf >"$out" 2>"$dir/$round.events.err" &
	opids=$!
	running+=("$opids")
	await_ready "mechanism ebpf" "$dir/$round.events.err" "supervisor events"
	oprog='^handle_exec$'
}
stop_events() {
	kill -INT "$opids"
	wait "$opids" || die "supervisor events exited with $?: $(cat "$dir/$round.events.err")"
	lost_total=$(sed -n 's/.* events, \([0-9]*\) lost.*/\1/p' "$dir/$round.events.err")
}
# run_daemon SUFFIX FLAG [null]: start the daemon with FLAG (the process
# events its feed logs); its files are named with SUFFIX (oerr: its
# stderr). With null its feed goes to stdout, which is /dev/null.
run_daemon() {
	out=$dir/$round.feed$1.json
	oerr=$dir/$round.daemon$1.err
	mkdir -p "$dir/state.$round$1"
	rm -f "$oerr" "$out"* # a kept directory's old files would pass await_ready or add lines
	local output="file:$out" stdout=$dir/$round.daemon$1.out
	if [ "${3:-}" = null ]; then
		output=stdout stdout=/dev/null
	fi
	"$supervisor" run --state-dir "$dir/state.$round$1" --socket "$dir/state.$round$1/api.sock" --cgroup off \
		--mechanism ebpf --log-output "$output" "$2" >"$stdout" 2>"$oerr" &
	opids=$!
	running+=("$opids")
	await_ready "serving on" "$oerr" "supervisor run"
	oprog='^handle_exec$'
}
start_daemon() { run_daemon "" --log-process-events; }
start_daemon-exec() { run_daemon -exec --log-process-events=exec; }
stop_daemon-exec() { stop_daemon; }
start_daemon-null() { run_daemon -null --log-process-events null; }
stop_daemon-null() {
	kill -TERM "$opids"
	wait "$opids" || die "supervisor run exited with $?: $(cat "$oerr")"
	lost_total=- # its totals went to /dev/null with its feed
}
start_daemon-quiet() { run_daemon -quiet --log-process-events=false; }
stop_daemon-quiet() { stop_daemon; }
stop_daemon() {
	kill -TERM "$opids"
	wait "$opids" || die "supervisor run exited with $?: $(cat "$oerr")"
	# Events the source lost, and process event lines the feed dropped
	# (the rotated files too).
	lost_total=$(jq -R -r 'fromjson? | (.supervisor.lost_events // 0) + (.supervisor.dropped.process_events // 0)' "$out"* 2>/dev/null |
		awk '{ n += $1 } END { print n + 0 }')
}
start_auditd() {
	out=$dir/audit/$round.audit.log
	mkdir -p "$dir/audit"
	chmod 0750 "$dir/audit"
	# Debian's configuration, writing to our directory, never rotating or
	# suspending, with no plugins.
	sed -e "s|^log_file = .*|log_file = $out|" \
		-e 's|^log_format = .*|log_format = RAW|' \
		-e 's|^max_log_file_action = .*|max_log_file_action = IGNORE|' \
		-e 's|^\(space_left_action\|admin_space_left_action\|disk_full_action\|disk_error_action\) = .*|\1 = IGNORE|' \
		-e "s|^plugin_dir = .*|plugin_dir = $dir/audit/plugins.d|" \
		/etc/audit/auditd.conf >"$dir/audit/auditd.conf"
	mkdir -p "$dir/audit/plugins.d"
	chmod 0640 "$dir/audit/auditd.conf"
	local st
	st=$(auditctl -s)
	[ "$(echo "$st" | awk '$1 == "pid" { print $2 }')" = 0 ] || die "another audit daemon runs: $(echo "$st" | grep pid)"
	audit_enabled=$(echo "$st" | awk '$1 == "enabled" { print $2 }')
	audit_backlog=$(echo "$st" | awk '$1 == "backlog_limit" { print $2 }')
	auditd -n -s enable -c "$dir/audit" >"$dir/$round.auditd.out" 2>&1 &
	opids=$!
	running+=("$opids")
	local i
	for i in $(seq 100); do
		[ "$(auditctl -s | awk '$1 == "pid" { print $2 }')" = "$opids" ] && break
		kill -0 "$opids" 2>/dev/null || die "auditd exited: $(cat "$dir/$round.auditd.out")"
		sleep 0.1
	done
	# Debian's rules set the backlog limit to 8192 (the kernel's default of
	# 64 would block the storm at every burst).
	auditctl -b 8192 >/dev/null
	audit_rule="always,exit -F arch=b64 -S execve"
	auditctl -a $audit_rule >/dev/null
	audit_lost0=$(auditctl -s | awk '$1 == "lost" { print $2 }')
	kauditd=$(pgrep -x kauditd | head -1)
	opids="$opids $kauditd"
	oprog='^$'
}
stop_auditd() {
	auditctl -d $audit_rule >/dev/null
	audit_rule=""
	lost_total=$(($(auditctl -s | awk '$1 == "lost" { print $2 }') - audit_lost0))
	local p=${opids%% *}
	kill -TERM "$p"
	wait "$p" || true
	auditctl -b "$audit_backlog" >/dev/null
	auditctl -e "$audit_enabled" >/dev/null
	audit_backlog="" audit_enabled=""
}
start_bpftrace() {
	out=$dir/$round.bpftrace.out
	if ! [ -e /sys/kernel/tracing/events ] && ! [ -e /sys/kernel/debug/tracing/events ]; then
		mount -t tracefs nodev /sys/kernel/tracing || die "cannot mount tracefs"
		tracefs_mounted=/sys/kernel/tracing
	fi
	rm -f "$dir/$round.bpftrace.err" # a kept directory's old file would pass await_ready
	bpftrace -B full -e 'tracepoint:syscalls:sys_enter_execve { join(args->argv); }' >"$out" 2>"$dir/$round.bpftrace.err" &
	opids=$!
	running+=("$opids")
	local i
	for i in $(seq 600); do
		[ -n "$(progs "$opids")" ] && grep -q "Attaching" "$out" "$dir/$round.bpftrace.err" 2>/dev/null && break
		kill -0 "$opids" 2>/dev/null || die "bpftrace exited: $(cat "$dir/$round.bpftrace.err")"
		sleep 0.1
	done
	sleep 0.5
	oprog='.'
}
stop_bpftrace() {
	kill -INT "$opids"
	wait "$opids" || true
	lost_total=$(sed -n 's/.*Lost \([0-9]*\) events.*/\1/p' "$out" "$dir/$round.bpftrace.err" | awk '{ n += $1 } END { print n + 0 }')
	sed -i '/^Attaching /d; /^Lost [0-9]* events/d; /^$/d' "$out"
	if [ -n "$tracefs_mounted" ]; then
		umount "$tracefs_mounted"
		tracefs_mounted=""
	fi
}

note "execstorm: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -r) nproc=$(nproc) execs=$execs per storm, warm-up $warmup"
note "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
for o in $observers; do
	declare -A base=() basecpu=()
	for k in small 4k; do
		storm "$k" "none$k"
		base[$k]=$rate
		basecpu[$k]=$scpu
		echo "round=$round observer=none storm=$k base=$rate rate=$rate scpu=$scpu" >>"$results"
	done
	"start_$o"
	if [ "$warmup" -gt 0 ]; then
		"$dir/bin/storm" -t "$target" -p "warm$o" -n "$warmup" -k 4k >/dev/null || die "warm-up storm failed"
		# shellcheck disable=SC2086
		drained $opids
		sleep 2
	fi
	# shellcheck disable=SC2086
	ids=$(progs ${opids%% *})
	declare -A tally=()
	for k in small 4k; do
		# shellcheck disable=SC2086
		b0=$(bpfstat "$oprog" $ids | tr '\t' ,)
		c0=$(cpuns $opids)
		o0=$(outbytes)
		storm "$k" "$o$k"
		drained $opids
		c1=$(cpuns $opids)
		o1=$(outbytes)
		b1=$(bpfstat "$oprog" $ids | tr '\t' ,)
		tally[$k]="${base[$k]} $rate $((c1 - c0)) $b0 $b1 ${basecpu[$k]} $scpu $((o1 - o0))"
	done
	"stop_$o"
	"args_$o" "$out" >"$dir/$round.args.$o"
	for k in small 4k; do
		set -- ${tally[$k]}
		record "$o" "$k" "$1" "$2" "$(check "$k" "$o$k" "$dir/$round.args.$o")" "${lost_total:-?}" "$3" "$4" "$5" "$6" "$7" "$8"
	done
	[ -n "$keep" ] || rm -f "$out"* "$dir/$round.args.$o" # hundreds of MB
	sleep 2 # leave the cores to others for a moment
done
done
note "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v n="$execs" '
function kv(line,   i, m, f, p) {
	delete v
	m = split(line, f, " ")
	for (i = 1; i <= m; i++) { p = index(f[i], "="); v[substr(f[i], 1, p - 1)] = substr(f[i], p + 1) }
}
function median(list,   m, a, i, j, t) {
	m = split(list, a, " ")
	if (m == 0) return "-"
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function us(x) { return (x == "-") ? "-" : sprintf("%.2fus", x) }
BEGIN {
	hdr = sprintf("%-5s %-12s %-5s %8s %8s %7s %15s %9s %9s %7s %9s %9s %9s %8s", "round", "observer", "storm", "base/s", "execs/s", "rate", "storm cpu/exec", "reported", "exact", "lost", "cpu/exec", "probe", "probes", "out/exec")
	print hdr
}
{
	kv($0)
	if (v["observer"] == "none") next
	split(v["bpf0"], b0, ","); split(v["bpf1"], b1, ",")
	runs = b1[2] - b0[2]
	probe = (runs > 0) ? (b1[1] - b0[1]) / runs / 1000 : "-"
	probes = (b1[3] > b0[3]) ? (b1[3] - b0[3]) / n / 1000 : "-"
	rel = 100 * v["rate"] / v["base"]; rep = 100 * v["reported"] / n; ex = 100 * v["exact"] / n
	cpu = v["cpu"] / 1000 / n
	ob = v["out"] / n
	printf "%-5s %-12s %-5s %8.0f %8.0f %6.1f%% %6.1f->%6.1fus %8.2f%% %8.2f%% %7s %7.2fus %9s %9s %8.0f\n", v["round"], v["observer"], v["storm"], v["base"], v["rate"], rel, v["basecpu"], v["scpu"], rep, ex, v["lost"], cpu, us(probe), us(probes), ob
	k = v["observer"] " " v["storm"]
	if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	B[k] = B[k] " " v["base"]; S[k] = S[k] " " v["rate"]; Q[k] = Q[k] " " rel; R[k] = R[k] " " rep; E[k] = E[k] " " ex
	L[k] = L[k] " " v["lost"]; C[k] = C[k] " " cpu; BC[k] = BC[k] " " v["basecpu"]; SC[k] = SC[k] " " v["scpu"]
	O[k] = O[k] " " ob
	if (probe != "-") P[k] = P[k] " " probe
	if (probes != "-") PP[k] = PP[k] " " probes
	nr[k]++
}
END {
	print ""
	print "medians over the rounds"
	print substr(hdr, 7)
	for (i = 1; i <= nk; i++) {
		k = order[i]; split(k, c, " ")
		printf "%-12s %-5s %8.0f %8.0f %6.1f%% %6.1f->%6.1fus %8.2f%% %8.2f%% %7s %7.2fus %9s %9s %8.0f\n", c[1], c[2], median(B[k]), median(S[k]), median(Q[k]), median(BC[k]), median(SC[k]), median(R[k]), median(E[k]), median(L[k]), median(C[k]), us(median(P[k])), us(median(PP[k])), median(O[k])
	}
}' "$results"
note "probe: the exec program's run time per run (bpf_stats); probes: all the observer's programs' run time per storm exec"
note "out/exec: bytes written to the observer's output file per storm exec"
[ -z "$keep" ] || note "raw results and observer output kept in $dir"
