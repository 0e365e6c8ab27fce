#!/usr/bin/env bash
# Checks on a real Mac (macOS 14.4 or later) what the Linux CI only proves
# against a simulated XNU kernel (internal/xnu/sim_test.go) and by
# cross-compiling:
#
#   1. a signal through proc_signal_with_audittoken reaches the instance,
#      and the same token gets ESRCH once it exited (zombie or reaped);
#   2. across exec the pid version changes and the uniqueid stays, and the
#      pre-exec token no longer signals;
#   3. p_puniqueid survives reparenting to launchd;
#   4. kqueue EVFILT_PROC on a zombie fails (ESRCH);
#   5. the openswarm flow: a backend launches a runtime through a bash
#      wrapper, the runtime's token is recorded, the backend dies, and
#      `supervisor kill PID TOKEN` tears down the wrapper and its
#      descendants while the user's own process of the same name lives;
#      then the same with the wrapper itself gone first (GONE, and its
#      reparented children still torn down by uniqueid lineage).
#
# Usage: scripts/macos-check.sh   (as a normal user; needs Go)
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(uname -s)" = Darwin ] || { echo "macos-check: this runs on macOS only" >&2; exit 2; }
ver=$(sw_vers -productVersion)
major=${ver%%.*}
minor=$(echo "$ver" | cut -d. -f2)
if [ "$major" -lt 14 ] || { [ "$major" -eq 14 ] && [ "${minor:-0}" -lt 4 ]; }; then
	echo "macos-check: macOS $ver: proc_signal_with_audittoken needs 14.4 or later;"
	echo "  on this system kill must refuse and say why:"
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
	pkill -9 -f "sleep 3017" 2>/dev/null || true
	pkill -9 -f "sleep 3018" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== 1-4: the kernel facts (internal/xnu integration tests)"
SUPERVISOR_REQUIRE_PRIVILEGED=1 go test -count=1 -v -run 'Integration' ./internal/xnu

echo "== 5: the openswarm flow through the CLI"
go build -o "$tmp/supervisor" ./cmd/supervisor
sv="$tmp/supervisor"

alive() { pgrep -f "$1" >/dev/null; }

# The user's own dev server elsewhere: must survive everything below.
sleep 3018 &
pids+=($!)

run_flow() { # $1: "backend" (the backend dies) or "wrapper" (the wrapper dies too)
	# backend -> run.sh (bash wrapper) -> node-like runtime -> its worker
	bash -c 'bash -c "sleep 3017 & (sleep 3017 & wait) & wait" & echo $! >"$0"; wait' "$tmp/wrapper.pid" &
	local backend=$!
	for _ in $(seq 50); do [ -s "$tmp/wrapper.pid" ] && break; sleep 0.1; done
	local wrapper
	wrapper=$(cat "$tmp/wrapper.pid")
	rm -f "$tmp/wrapper.pid"
	sleep 0.5
	local tok
	tok=$("$sv" token "$wrapper")
	echo "wrapper $wrapper token $tok"
	case "$tok" in v1:u:*:*:[0-9]*) ;; *) echo "FAIL: token $tok carries no uniqueid"; exit 1 ;; esac
	kill -9 "$backend"
	wait "$backend" 2>/dev/null || true
	if [ "$1" = wrapper ]; then
		kill -9 "$wrapper"
		sleep 0.5
	fi
	local code=0
	"$sv" kill "$wrapper" "$tok" --grace 2s --json >"$tmp/out.json" || code=$?
	cat "$tmp/out.json"
	[ "$code" = 0 ] || { echo "FAIL: supervisor kill exited $code, want 0"; exit 1; }
	sleep 0.5
	if alive "sleep 3017"; then echo "FAIL: runtime processes survived"; pgrep -lf "sleep 3017"; exit 1; fi
	alive "sleep 3018" || { echo "FAIL: the user's own process was killed"; exit 1; }
	echo "ok: $1 flow"
}

if [ "$major" -lt 14 ] || { [ "$major" -eq 14 ] && [ "${minor:-0}" -lt 4 ]; }; then
	bash -c 'sleep 3017 & wait' &
	pids+=($!)
	sleep 0.5
	tok=$("$sv" token $!)
	code=0
	"$sv" kill $! "$tok" --json >"$tmp/out.json" || code=$?
	grep -q '14.4' "$tmp/out.json" && [ "$code" = 1 ] && alive "sleep 3017" ||
		{ echo "FAIL: below 14.4 kill must refuse (exit 1) and say why"; cat "$tmp/out.json"; exit 1; }
	echo "ok: kill refused below 14.4"
	exit 0
fi

run_flow backend
run_flow wrapper
echo "macos-check: all checks passed on macOS $ver"
