#!/usr/bin/env bash
# build-static.sh: build the supervisor as one static binary (CGO_ENABLED=0,
# no libc, no dynamic loader) into dist/supervisor, check that it is static,
# and print its size.
#
#   scripts/build-static.sh               # host GOARCH
#   GOARCH=arm64 scripts/build-static.sh  # cross-build; the file check still runs
#
# The version stamped into the binary (`supervisor version`, the metrics'
# supervisor_build_info) is `git describe --always --dirty`, or $VERSION when
# set, or "dev" outside a git checkout. The eBPF object is embedded by
# bpf2go's committed output, so no clang is needed. Works offline once the
# module cache holds the dependencies.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

out=${OUT:-dist/supervisor}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
mkdir -p "$(dirname "$out")"

export CGO_ENABLED=0 GOOS=linux
# -buildvcs=auto: the commit and its date are stamped (`supervisor version`
# shows them) in a git checkout, and skipped without error in a tree
# without .git (a source tarball); the version itself comes from -X.
go build -buildvcs=auto -trimpath \
	-ldflags "-s -w -buildid= -X main.version=${version}" \
	-o "$out" ./cmd/supervisor

# Static: no PT_INTERP and no dynamic section. `file` says "statically
# linked"; ldd says "not a dynamic executable" (glibc) or fails (others).
if command -v file >/dev/null; then
	desc=$(file -b "$out")
	case $desc in
	*"statically linked"* | *"static-pie linked"*) ;;
	*)
		echo "build-static: $out is not static: $desc" >&2
		exit 1
		;;
	esac
fi
if [ "$(go env GOARCH)" = "$(go env GOHOSTARCH)" ] && command -v ldd >/dev/null; then
	if ldd "$out" 2>&1 | grep -q '=>'; then
		echo "build-static: $out links shared libraries:" >&2
		ldd "$out" >&2
		exit 1
	fi
fi

size=$(stat -c %s "$out")
printf 'build-static: %s %s (%s/%s) %d bytes (%.1f MiB)\n' \
	"$out" "$version" "$(go env GOOS)" "$(go env GOARCH)" "$size" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')"
