#!/usr/bin/env bash
# coexist.sh: install Debian's supervisor (supervisord) and the built
# procsupervisor .deb (scripts/package.sh) side by side, and check that they
# coexist:
#   - both install, supervisord's automatic start blocked by a policy-rc.d;
#   - `dpkg -V` is clean for both, after install and after both ran;
#   - no path is in both `dpkg -L` lists, except shared directories
#     (/usr/bin, /lib/systemd/system...) none of which names supervisor;
#   - supervisord, started by hand with its own config, answers
#     `supervisorctl status` on its socket (/run/supervisor.sock) with a
#     program of ours running under it;
#   - our daemon, started by hand (`supervisor run --config
#     /etc/procsupervisor/procsupervisor.conf`), creates /run/procsupervisor
#     (root, 0755) and answers `supervisor status` with no --socket, at the
#     binary's default /run/procsupervisor/api.sock; supervisord's socket is
#     not taken for ours;
#   - with our daemon gone, `supervisor status` exits 69 saying that nothing
#     listens at its socket and naming supervisord's, which it does not try.
# Then it stops both and purges both (and the dependencies the install
# added, the group, state, logs and directories they created), so the
# machine is left as found, even when a check fails. Any mismatch fails the
# script with a message saying what was expected.
#
# Needs root, dpkg and apt-get with the package lists (apt-get update), and
# no supervisor or procsupervisor installed already (it would purge them).
# Runs without systemd as init: the daemons are started by hand.
#
#   scripts/package.sh && scripts/coexist.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

say() { echo "coexist: $*"; }
fail() {
	echo "coexist: FAIL: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (it installs packages)"
command -v dpkg >/dev/null && command -v apt-get >/dev/null || fail "needs dpkg and apt-get"

shopt -s nullglob
debs=(dist/procsupervisor_*.deb)
shopt -u nullglob
[ "${#debs[@]}" = 1 ] || fail "want exactly one dist/procsupervisor_*.deb (run scripts/package.sh), found ${#debs[@]}"
deb=${debs[0]}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q ' installed$'; }
# Known to dpkg in any state but "not installed" (installed, or removed
# with its config kept): the purge at the end would take what is there.
known() {
	local st
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) || return 1
	case "$st" in "" | "un"* | "pn"*) return 1 ;; esac
}
for p in supervisor procsupervisor; do
	if known "$p"; then
		fail "$p is known to dpkg already ($(dpkg-query -W -f='${db:Status-Abbrev}' "$p")); this script installs and purges it: run it on a host without it"
	fi
done
# A daemon of this supervisor running as root on its defaults would share
# the state and socket of the one started here.
for p in /run/procsupervisor /var/lib/procsupervisor; do
	[ ! -e "$p" ] || fail "$p exists: a supervisor daemon runs or ran here on root's defaults; stop it and remove $p first"
done
[ ! -e /run/supervisor.sock ] || fail "/run/supervisor.sock exists: a supervisord runs here already"

export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
ours_conf=/etc/procsupervisor/procsupervisor.conf
ours_sock=/run/procsupervisor/api.sock
theirs_conf=/etc/supervisor/supervisord.conf
theirs_sock=/run/supervisor.sock
probe_conf=/etc/supervisor/conf.d/coexist-probe.conf
tmp=$(mktemp -d)

# What the machine has before, so cleanup removes only what this run made.
# The packages apt would add with supervisor (its dependencies not yet
# installed) are purged with it at the end.
if ! sim=$(apt-get install -s --no-install-recommends supervisor 2>&1); then
	echo "$sim" >&2
	fail "apt-get cannot install supervisor (run apt-get update first?)"
fi
added=$(echo "$sim" | awk '/^Inst /{print $2}')
[ -n "$added" ] || fail "apt-get would install nothing for supervisor"
existed=()
for p in /var/log/supervisor /etc/procsupervisor /etc/supervisor; do
	if [ -e "$p" ]; then existed+=("$p"); fi
done
group_existed=0
getent group procsupervisor >/dev/null && group_existed=1
policy=/usr/sbin/policy-rc.d
[ -e "$policy" ] && cp -a "$policy" "$tmp/policy-rc.d.orig"

ours_pid=
theirs_pid=
cleanup() {
	local rc=$?
	set +e
	say "cleaning up"
	if [ -n "$ours_pid" ] && kill -0 "$ours_pid" 2>/dev/null; then
		kill -TERM "$ours_pid"
		wait "$ours_pid" 2>/dev/null
	fi
	if [ -n "$theirs_pid" ] && kill -0 "$theirs_pid" 2>/dev/null; then
		supervisorctl -c "$theirs_conf" shutdown >/dev/null 2>&1 || kill -TERM "$theirs_pid"
		for _ in $(seq 100); do kill -0 "$theirs_pid" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -f "$probe_conf"
	installed procsupervisor && dpkg --purge procsupervisor >/dev/null
	local purge=()
	for p in $added; do installed "$p" && purge+=("$p"); done
	[ "${#purge[@]}" -gt 0 ] && "${apt[@]}" purge "${purge[@]}" >/dev/null
	for p in /run/procsupervisor /var/lib/procsupervisor /var/log/supervisor /etc/procsupervisor /etc/supervisor "$theirs_sock"; do
		if [[ " ${existed[*]} " != *" $p "* ]]; then rm -rf "$p"; fi
	done
	[ "$group_existed" = 0 ] && getent group procsupervisor >/dev/null && groupdel procsupervisor
	if [ -e "$tmp/policy-rc.d.orig" ]; then cp -a "$tmp/policy-rc.d.orig" "$policy"; else rm -f "$policy"; fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT

# supervisord must not start on install: policy-rc.d answering 101 makes
# invoke-rc.d (and deb-systemd-invoke) skip the start.
printf '#!/bin/sh\n# coexist.sh: no service starts during the install\nexit 101\n' >"$policy"
chmod 0755 "$policy"

say "installing Debian's supervisor ($(echo $added))"
"${apt[@]}" install supervisor >"$tmp/apt.log" 2>&1 || {
	cat "$tmp/apt.log" >&2
	fail "apt-get install supervisor"
}
say "installing $deb beside it"
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || {
	cat "$tmp/dpkg.log" >&2
	fail "dpkg -i $deb (beside supervisor $(dpkg-query -W -f='${Version}' supervisor))"
}
installed supervisor || fail "supervisor is not installed after installing $deb"
installed procsupervisor || fail "procsupervisor is not installed"
[ ! -S "$theirs_sock" ] || fail "$theirs_sock exists: supervisord started despite the policy-rc.d"

verify() {
	local out
	out=$(dpkg -V supervisor procsupervisor 2>&1) || true
	[ -z "$out" ] || fail "dpkg -V $1:"$'\n'"$out"
	say "dpkg -V supervisor procsupervisor: clean $1"
}
verify "after install"

# Paths both packages list: only directories, and none named *supervisor*.
dpkg -L supervisor | sort -u >"$tmp/theirs.list"
dpkg -L procsupervisor | sort -u >"$tmp/ours.list"
shared=$(comm -12 "$tmp/theirs.list" "$tmp/ours.list")
for p in $shared; do
	if [ ! -d "$p" ] || [[ "$(basename "$p")" == *supervisor* ]]; then
		fail "both packages ship $p"
	fi
done
say "shared directories only: $(echo $shared)"
owner=$(dpkg -S /usr/bin/supervisor | cut -d: -f1)
[ "$owner" = procsupervisor ] || fail "/usr/bin/supervisor belongs to $owner, want procsupervisor"

# supervisord by hand, on its own config, with one program to show.
cat >"$probe_conf" <<'EOF'
[program:coexist-probe]
command=/bin/sleep 600
startsecs=1
EOF
say "starting supervisord -c $theirs_conf"
supervisord -c "$theirs_conf" || fail "supervisord -c $theirs_conf"
theirs_status=
for _ in $(seq 150); do
	theirs_status=$(supervisorctl -c "$theirs_conf" status 2>&1) || true
	[[ "$theirs_status" =~ coexist-probe\ +RUNNING ]] && break
	sleep 0.2
done
[[ "$theirs_status" =~ coexist-probe\ +RUNNING ]] || fail "supervisorctl status: want coexist-probe RUNNING, got: $theirs_status"
theirs_pid=$(cat /run/supervisord.pid)
[ -S "$theirs_sock" ] || fail "supervisord has no socket at $theirs_sock"
say "supervisorctl status: $theirs_status"

# Our daemon by hand, on the packaged config; clients use the default.
unset SUPERVISOR_SOCKET
say "starting supervisor run --config $ours_conf"
/usr/bin/supervisor run --config "$ours_conf" >"$tmp/ours.log" 2>&1 &
ours_pid=$!
ours_status=
for _ in $(seq 300); do
	kill -0 "$ours_pid" 2>/dev/null || {
		cat "$tmp/ours.log" >&2
		fail "supervisor run exited before answering"
	}
	ours_status=$(/usr/bin/supervisor status 2>&1) && break
	sleep 0.2
done
/usr/bin/supervisor status >/dev/null 2>&1 || fail "supervisor status (no --socket) did not answer: $ours_status"
[ -S "$ours_sock" ] || fail "no socket at $ours_sock"
got=$(stat -c '%U %a' /run/procsupervisor)
[ "$got" = "root 755" ] || fail "/run/procsupervisor is '$got', want 'root 755' (made by the daemon)"
got=$(stat -c '%U %G %a' "$ours_sock")
[ "$got" = "root procsupervisor 660" ] || fail "$ours_sock is '$got', want 'root procsupervisor 660'"
say "supervisor status: $(echo "$ours_status" | head -n 3 | tr '\n' ' ')"

# A user's client (default: their own $XDG_RUNTIME_DIR) is told where
# root's daemon is; outside the socket group, that socket refuses them.
rc=0
setpriv --reuid 65534 --regid 65534 --clear-groups env -u SUPERVISOR_SOCKET XDG_RUNTIME_DIR=/nonexistent \
	/usr/bin/supervisor status >"$tmp/user.out" 2>&1 || rc=$?
[ "$rc" = 69 ] && grep -q "$ours_sock exists" "$tmp/user.out" ||
	fail "supervisor status as nobody: exit $rc, want 69 naming $ours_sock: $(cat "$tmp/user.out")"
rc=0
setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/supervisor status --socket "$ours_sock" >"$tmp/user.out" 2>&1 || rc=$?
[ "$rc" = 77 ] || fail "supervisor status --socket $ours_sock as nobody (not in group procsupervisor): exit $rc, want 77: $(cat "$tmp/user.out")"
say "as nobody: told where root's daemon is (69), refused by its socket (77)"

# Each answers on its own socket, and only there.
if /usr/bin/supervisor status --socket "$theirs_sock" >"$tmp/cross.out" 2>&1; then
	fail "supervisor status --socket $theirs_sock succeeded: supervisord's socket taken for ours: $(cat "$tmp/cross.out")"
fi
theirs_status=$(supervisorctl -c "$theirs_conf" status 2>&1) || true
[[ "$theirs_status" =~ coexist-probe\ +RUNNING ]] || fail "supervisorctl status with both running: $theirs_status"
verify "with both daemons running"

# Our daemon gone (and its directory, as systemd removes it): the client
# says so and names supervisord's socket, without calling it.
kill -TERM "$ours_pid"
wait "$ours_pid" || fail "supervisor run exited $? on SIGTERM: $(tail -n 5 "$tmp/ours.log")"
ours_pid=
rm -rf /run/procsupervisor
rc=0
/usr/bin/supervisor status >"$tmp/gone.out" 2>&1 || rc=$?
[ "$rc" = 69 ] || fail "supervisor status with no daemon: exit $rc, want 69: $(cat "$tmp/gone.out")"
grep -q "no socket at $ours_sock" "$tmp/gone.out" || fail "supervisor status with no daemon does not say there is no socket at $ours_sock: $(cat "$tmp/gone.out")"
grep -q "$theirs_sock exists" "$tmp/gone.out" || fail "supervisor status with no daemon does not name $theirs_sock: $(cat "$tmp/gone.out")"
say "supervisor status without a daemon: exit 69, $(head -c 300 "$tmp/gone.out" | tr '\n' ' ')"

supervisorctl -c "$theirs_conf" shutdown >/dev/null || fail "supervisorctl shutdown"
for _ in $(seq 100); do kill -0 "$theirs_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$theirs_pid" 2>/dev/null && fail "supervisord ($theirs_pid) still running after shutdown"
theirs_pid=

# Purge both; then nothing of either may be left.
rm -f "$probe_conf"
dpkg --purge procsupervisor >"$tmp/purge.log" 2>&1 || fail "dpkg --purge procsupervisor: $(cat "$tmp/purge.log")"
purge=()
for p in $added; do installed "$p" && purge+=("$p"); done
"${apt[@]}" purge "${purge[@]}" >"$tmp/purge.log" 2>&1 || fail "apt-get purge ${purge[*]}: $(cat "$tmp/purge.log")"
for p in supervisor procsupervisor; do
	if known "$p"; then fail "$p left in dpkg state '$(dpkg-query -W -f='${db:Status-Abbrev}' "$p")' after purge"; fi
done
for p in /etc/procsupervisor/procsupervisor.conf /lib/systemd/system/procsupervisor.service /usr/bin/supervisor /usr/bin/supervisord /etc/supervisor/supervisord.conf; do
	if [ -e "$p" ]; then fail "$p left after purge"; fi
done
say "ok: supervisor $(echo "$sim" | awk '/^Inst supervisor /{print $3}' | tr -d '(') and procsupervisor coexist; both purged"
