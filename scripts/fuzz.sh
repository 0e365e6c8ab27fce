#!/usr/bin/env bash
# Runs every Fuzz* target in the module for FUZZTIME (default 30s) each.
# New crashers land in the package's testdata/fuzz/ and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
status=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "fuzz $pkg $name ($fuzztime)"
		go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 10x >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; status=1; }
	done
done
rm -f /tmp/fuzz.$$.log
exit $status
