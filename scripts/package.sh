#!/usr/bin/env bash
# package.sh: build the static binary (scripts/build-static.sh), then the
# .deb and .rpm with nfpm (packaging/nfpm.yaml) into dist/, list what each
# package holds, and print the sizes.
#
#   scripts/package.sh                 # host GOARCH
#   GOARCH=arm64 scripts/package.sh    # cross-packages
#
# Offline: nfpm runs as a Go module tool (`go tool nfpm`) from the module
# cache; neither dpkg-deb nor rpmbuild is needed to build (they are used,
# when present, only to inspect the result).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

GOARCH=${GOARCH:-$(go env GOARCH)}
export GOARCH

# Package version: a release tag vX.Y.Z gives X.Y.Z; otherwise
# 0.0.0+git<commits>.<hash>[.dirty], which sorts by commit count.
if desc=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
	PKG_VERSION=${desc#v}
elif hash=$(git rev-parse --short HEAD 2>/dev/null); then
	PKG_VERSION="0.0.0+git$(git rev-list --count HEAD).${hash}"
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		PKG_VERSION+=".dirty"
	fi
else
	PKG_VERSION=0.0.0+dev
fi
export PKG_VERSION

scripts/build-static.sh

mkdir -p dist
for fmt in deb rpm; do
	# nfpm names the file itself (procsupervisor_VERSION_ARCH.deb,
	# procsupervisor-VERSION.ARCH.rpm); remove older ones so dist/ holds one.
	rm -f dist/*."$fmt"
	go tool nfpm package --config packaging/nfpm.yaml --packager "$fmt" --target dist/
done

deb=$(ls dist/*.deb)
rpm=$(ls dist/*.rpm)

if command -v dpkg-deb >/dev/null; then
	echo "== $deb"
	dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
	dpkg-deb --contents "$deb"
fi
if command -v rpm >/dev/null; then
	echo "== $rpm"
	rpm -qip "$rpm"
	rpm -qlvp "$rpm"
	rpm -qp --scripts "$rpm" | head -n 5
else
	echo "== $rpm (rpm not installed: not inspected)"
fi

printf 'package: %-40s %10d bytes\n' dist/supervisor "$(stat -c %s dist/supervisor)" \
	"$deb" "$(stat -c %s "$deb")" "$rpm" "$(stat -c %s "$rpm")"
