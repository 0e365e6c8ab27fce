#!/bin/sh
# postremove: forget the removed unit. State (/var/lib/procsupervisor) and the
# config are kept, so a reinstall re-adopts what is still running; delete
# them by hand (or dpkg --purge for the config).
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
