#!/bin/sh
# preremove: runs before the package's files go, on removal and on upgrade,
# for .deb (prerm remove|upgrade ...) and .rpm (%preun with $1 = 0 on
# removal, 1 on upgrade). Only a real removal stops the daemon; the processes
# it launched keep running (KillMode=process) and are no longer supervised.
set -e
case "$1" in
remove | purge | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl disable --now procsupervisor.service || true
fi
exit 0
