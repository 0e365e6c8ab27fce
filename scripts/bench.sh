#!/usr/bin/env bash
# bench.sh: the Go benchmarks behind the lineage issue's figures, and a
# summary of them.
#
#   internal/lineage               Apply (one fork or exit event into the
#                                  graph), Find and Watch (a verify answered
#                                  from the graph), Memory (heap bytes per
#                                  live tracked process)
#   internal/verdict               JudgeLive (verify of a live pid: pidfd +
#                                  token + verdict), ReadToken (pidfd open +
#                                  token), PSCheck (the `ps -o lstart= -p PID`
#                                  subprocess the seeds' applications run)
#   internal/events/tracepoint     Decode (ring buffer record -> Event), Read
#                                  (whole Read path over a replayed record)
#   internal/events/proccon        Decode (netlink message -> Event)
#
# Usage: scripts/bench.sh [--benchtime D] [--ps-benchtime D] [--count N]
#          [--out FILE]
# Defaults: --benchtime 1s, --ps-benchtime 200x (one ps is milliseconds),
# --count 1. The raw `go test` output goes to FILE (default a temp file)
# and the summary to stdout. Needs root for the verdict benchmarks (pidfd of
# its own process works unprivileged; the package's setup may not).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
benchtime=1s
psbenchtime=200x
count=1
out=""

while [ $# -gt 0 ]; do
	case "$1" in
	--benchtime) benchtime=$2; shift 2 ;;
	--ps-benchtime) psbenchtime=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 64 ;;
	*) echo "bench: unknown argument $1" >&2; exit 64 ;;
	esac
done
[ -n "$out" ] || out=$(mktemp /tmp/bench.XXXXXX)
: >"$out"

run() { # PKG REGEX BENCHTIME
	echo "# go test -run '^\$' -bench '$2' -benchtime $3 -count $count $1" >>"$out"
	(cd "$repo" && go test -run '^$' -bench "$2" -benchtime "$3" -count "$count" "$1") >>"$out" 2>&1 ||
		{ echo "bench: $1 failed; see $out" >&2; tail -20 "$out" >&2; exit 1; }
}

echo "# bench: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -r) nproc=$(nproc) load $(cut -d' ' -f1-3 /proc/loadavg)"
run ./internal/lineage '^Benchmark(Apply|Find|Watch|Memory)$' "$benchtime"
run ./internal/verdict '^Benchmark(JudgeLive|ReadToken)$' "$benchtime"
run ./internal/verdict '^BenchmarkPSCheck$' "$psbenchtime"
run ./internal/events/tracepoint '^Benchmark(Decode|Read)$' "$benchtime"
run ./internal/events/proccon '^BenchmarkDecode$' "$benchtime"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg); raw output in $out"

# Summary: median ns/op per benchmark (over --count), named by package.
awk '
/^pkg: / { pkg = $2; sub(/.*\/internal\//, "", pkg) }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	k = pkg "." name
	if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	for (i = 3; i < NF; i++) {
		if ($(i + 1) == "ns/op") ns[k] = ns[k] " " $i
		if ($(i + 1) == "B/op") bop[k] = $i
		if ($(i + 1) == "allocs/op") aop[k] = $i
		if ($(i + 1) == "bytes/process") bpp[k] = bpp[k] " " $i
	}
}
function median(list,   m, a, i, j, t) {
	m = split(list, a, " ")
	if (m == 0) return -1
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function pretty(v) {
	if (v >= 1e6) return sprintf("%.2f ms", v / 1e6)
	if (v >= 1e3) return sprintf("%.2f us", v / 1e3)
	return sprintf("%.1f ns", v)
}
END {
	printf "%-28s %12s %8s %10s\n", "benchmark", "per op", "B/op", "allocs/op"
	for (i = 1; i <= n; i++) {
		k = order[i]
		printf "%-28s %12s %8s %10s\n", k, pretty(median(ns[k])), (k in bop) ? bop[k] : "-", (k in aop) ? aop[k] : "-"
	}
	m = median(bpp["lineage.Memory"])
	printf "\nheap per live tracked process: %.0f bytes (target <= 256)\n", m
	f = median(ns["lineage.Find"]); w = median(ns["lineage.Watch"])
	printf "verify from the graph: Find %s, Watch %s (target <= 1 us)\n", pretty(f), pretty(w)
	j = median(ns["verdict.JudgeLive"]); p = median(ns["verdict.PSCheck"])
	if (j > 0 && p > 0)
		printf "ps check / JudgeLive: %s / %s = %.0fx; ps check / graph Find: %.0fx\n", pretty(p), pretty(j), p / j, (f > 0) ? p / f : 0
	a = median(ns["lineage.Apply"])
	printf "graph Apply per event: %s\n", pretty(a)
}' "$out"
