#!/usr/bin/env bash
# What a request costs as live claims grow: verify, get, a list page, kill,
# release (medians), a reconcile pass (a dry-run reap judging every claim),
# the daemon's RSS and open descriptors, at each size. Each size starts that
# many `sleep` processes under one daemon.
# Usage (as root): SIZES=10,1000,10000 scripts/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SUPERVISOR_SCALE="${SIZES:-10,1000,10000}" go test -count=1 -timeout 60m -run '^TestScale$' -v ./cmd/supervisor/ |
	grep -E 'claims|^ *scale_linux_test.go|^(--- )?(PASS|FAIL)|^ok' | sed 's/^ *scale_linux_test.go:[0-9]*: //'
