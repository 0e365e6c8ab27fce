#!/usr/bin/env bash
# Delay from a holder's exit to the first signal its grant receives, with
# the daemon's periodic pass an hour away (so only the exit path acts), for
# eBPF and netlink, holders of a few KiB and of 256 MiB. Prints p50, p99 and
# max per case. "Exit" is when the holder's pidfd turned readable; the eBPF
# exit event (sched_process_exit, at the start of do_exit) comes before
# that for a large holder, so its delays can be negative.
# Usage (as root): ROUNDS=100 scripts/holder-exit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
HOLDER_ROUNDS="${ROUNDS:-100}" SUPERVISOR_REQUIRE_PRIVILEGED=1 \
	go test -count=1 -timeout 60m -run 'TestIntegrationHolderExitActs' -v ./cmd/supervisor/ |
	grep -E 'exit to first signal|^(--- )?(PASS|FAIL)|^ok' | sed 's/^ *holder_linux_test.go:[0-9]*: //'
