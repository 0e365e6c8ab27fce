#!/usr/bin/env bash
# Runs every Fuzz* target in the module for FUZZTIME (default 30s) each.
# New crashers land in the package's testdata/fuzz/ and fail the run.
#
# Go up to 1.26 has a race in its fuzzing coordinator (go.dev/issue/75804):
# when a duration -fuzztime runs out, a worker's cancelled context can be
# reported as a failure, "context deadline exceeded", with no failing input.
# A budget counted in executions ("Nx") has no deadline to race. So a run
# that ends that way, with no failing input written, is run again on a
# count: as many executions as the first run reached (at least 2000). The
# second run has no deadline, so it cannot end that way again; a real crash
# is never retried.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		budget=$fuzztime
		for attempt in 1 2; do
			echo "fuzz $pkg $name ($budget)"
			if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" -fuzzminimizetime 10x >"$log" 2>&1; then
				break
			fi
			if [ "$attempt" = 1 ] && [[ $budget != *x ]] &&
				grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input' "$log"; then
				execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | tr -dc 0-9)
				budget=$(( ${execs:-0} > 2000 ? ${execs:-0} : 2000 ))x
				echo "  (context deadline exceeded without a failing input, go.dev/issue/75804: again, counted)"
				continue
			fi
			cat "$log"
			status=1
			break
		done
	done
done
exit $status
