#!/usr/bin/env bash
# Writes docs/log-samples.md: one real ECS line of each kind the daemon logs
# in ordinary use, captured from a private daemon (every process event on,
# eBPF) while this script launches, admits, verifies, kills, releases and
# reaps, lets a wall clock expire, a holder exit and a job finish. Kinds
# only a fault produces (events_lost, log_lines_dropped, internal_error)
# are listed as not captured.
# Usage (as root): scripts/log-samples.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-}"
work=$(mktemp -d /tmp/log-samples.XXXXXX)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
	go build -o "$work/supervisor" ./cmd/supervisor
	bin="$work/supervisor"
fi
log="$work/log.json"
sock="$work/run/api.sock"
"$bin" run --state-dir "$work/state" --socket "$sock" --mechanism ebpf --grace 1s \
	--log-process-events --log-output "file:$log" >/dev/null 2>"$work/daemon.err" &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
sv() { "$bin" "$1" --socket "$sock" "${@:2}"; }

read -r grant _ _ < <(sv launch --owner demo -- sleep 600)
sv launch --owner demo --wall-clock 1s -- sleep 600 >/dev/null
read -r job _ _ < <(sv launch --owner demo --detach -- sh -c 'echo done; exit 3')
sh -c "'$bin' launch --socket '$sock' --owner demo --bind-to-caller -- sleep 600 >/dev/null; sleep 0.5"
sleep 600 >/dev/null 2>&1 &
other=$!
tok=$("$bin" token "$other")
sv admit --owner demo "$other" "$tok" >/dev/null
sv verify "$other" "$tok" >/dev/null || true
sv kill "$other" "$tok" >/dev/null || true
sv wait "$job" >/dev/null || true
sv release "$grant" >/dev/null
sv reap >/dev/null || true
sleep 2 # the wall clock, the holder's teardown
kill -TERM "$daemon"
wait "$daemon" || true
daemon=

python3 - "$log" docs/log-samples.md <<'EOF'
import json, sys
order = ["supervisor_started", "reconcile", "process_started", "process_exec", "process_ended",
         "launch_requested", "admit_requested", "verdict", "kill_requested", "signal_sent", "teardown",
         "release_requested", "reap_requested", "claim_state_changed", "wall_clock_expired",
         "holder_exited", "job_exited", "supervisor_stopped"]
faults = ["events_lost", "log_lines_dropped", "internal_error"]
first = {}
for line in open(sys.argv[1]):
    ev = json.loads(line)
    a = ev["event"]["action"]
    # The exec line of sleep shows the context an exec carries.
    if a == "process_exec" and ev["process"].get("name") != "sleep":
        continue
    first.setdefault(a, line.rstrip("\n"))
missing = [a for a in order if a not in first]
if missing:
    sys.exit("not captured: " + ", ".join(missing))
with open(sys.argv[2], "w") as out:
    out.write("# Log feed: one real line of each kind\n\n")
    out.write("Written by `scripts/log-samples.sh`: a private daemon (`supervisor run --mechanism ebpf "
              "--log-process-events --log-output file:...`, ECS) while the script launches, admits, "
              "verifies, kills, releases and reaps, lets a wall clock expire, a holder exit and a job "
              "finish. Field names and types follow ECS (checked by internal/logfeed's schema test); "
              "what ECS has no field for is under `supervisor.*`. Not captured, because only a fault "
              "produces them: " + ", ".join("`%s`" % a for a in faults) + " (see the README).\n")
    for a in order:
        out.write("\n## %s\n\n```json\n%s\n```\n" % (a, first[a]))
EOF
echo "wrote docs/log-samples.md"
