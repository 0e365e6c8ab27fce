#!/bin/sh
# postinstall: runs after the package's files are in place, on install and
# on upgrade, for both .deb (postinst configure [OLD-VERSION]) and .rpm
# (%post with $1 = 1 on install, 2 on upgrade).
set -e

# The socket's group (socket_group in
# /etc/procsupervisor/procsupervisor.conf): members may call the daemon's
# API. Not "supervisor": supervisord's guides have admins create a group of
# that name for supervisord's own socket, and its members must not get
# this daemon's API by accident.
if ! getent group procsupervisor >/dev/null 2>&1; then
	if command -v groupadd >/dev/null 2>&1; then
		groupadd --system procsupervisor
	elif command -v addgroup >/dev/null 2>&1; then
		addgroup --system procsupervisor
	fi
fi

# Only when systemd is the running init (not in a container build, a chroot
# or an image being assembled).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
	upgrade=0
	case "$1" in
	configure) [ -n "$2" ] && upgrade=1 ;; # deb: configure OLD-VERSION
	2) upgrade=1 ;;                          # rpm: second instance installed
	esac
	if [ "$upgrade" = 1 ]; then
		# Restart onto the new binary. Safe: KillMode=process stops only
		# the daemon; its workloads keep running and are re-adopted.
		systemctl try-restart procsupervisor.service || true
	else
		# Enable, do not start: review
		# /etc/procsupervisor/procsupervisor.conf, then
		# `systemctl start procsupervisor`.
		systemctl enable procsupervisor.service || true
	fi
fi
exit 0
