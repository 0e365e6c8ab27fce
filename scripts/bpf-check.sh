#!/usr/bin/env bash
# bpf-check.sh: regenerate the committed bpf2go output of the eBPF event
# source and fail if it differs from what is committed (drift between
# bpf/*.c and internal/events/tracepoint/process_bpfel.{go,o}).
#
# The compiler is pinned in gen.go (clang-14, llvm-strip-14, fixed cflags);
# the environment is pinned here so nothing else leaks into the object.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

for tool in clang-14 llvm-strip-14; do
	if ! command -v "$tool" >/dev/null; then
		echo "bpf-check: $tool not found (apt-get install clang-14 llvm-14)" >&2
		exit 1
	fi
done

export LC_ALL=C TZ=UTC SOURCE_DATE_EPOCH=0
unset BPF2GO_CC BPF2GO_STRIP BPF2GO_CFLAGS BPF2GO_FLAGS BPF2GO_MAKEBASE CFLAGS CPATH C_INCLUDE_PATH

(cd internal/events/tracepoint && go generate)

generated=(internal/events/tracepoint/process_bpfel.go internal/events/tracepoint/process_bpfel.o)
if ! git diff --exit-code --stat -- "${generated[@]}"; then
	echo "bpf-check: generated eBPF output is out of date; run 'cd internal/events/tracepoint && go generate' and commit it" >&2
	exit 1
fi
if untracked=$(git ls-files --others --exclude-standard -- internal/events/tracepoint/'*_bpf*') && [ -n "$untracked" ]; then
	echo "bpf-check: generated files not committed:" >&2
	echo "$untracked" >&2
	exit 1
fi
echo "bpf-check: generated eBPF output is up to date"
