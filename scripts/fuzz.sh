#!/usr/bin/env bash
# Runs every Fuzz* target in the module for FUZZTIME (default 30s) each.
# New crashers land in the package's testdata/fuzz/ and fail the run.
#
# `go test -fuzz` sometimes ends a clean run with "context deadline
# exceeded" when -fuzztime runs out while a worker is busy (a toolchain
# flake, no input at fault): such a run, with no failing input written, is
# tried once more. A real crash is never retried.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		for attempt in 1 2; do
			echo "fuzz $pkg $name ($fuzztime)"
			if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 10x >"$log" 2>&1; then
				break
			fi
			if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input' "$log"; then
				echo "  (context deadline exceeded without a failing input: once more)"
				continue
			fi
			cat "$log"
			status=1
			break
		done
	done
done
exit $status
