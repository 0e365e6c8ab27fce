# match.awk: how many of a fork storm's children an observer reported.
#
#   awk -v fmt=supervisor|forkstat -v workers=P1,P2 -f match.awk PIDFILE OUTPUT
#
# PIDFILE is the storm's list of child pids, one per line (a pid may appear
# more than once: the kernel reissues pids within a long storm). OUTPUT is
# what the observer printed: `supervisor events --json` lines, or forkstat's
# default table. A storm child is reported when the observer printed its
# fork with one of the storm's workers as parent, and its exit. Counts are
# per occurrence: for each pid, the reported children are
# min(times the storm created it, storm forks seen, exits seen), so a pid
# reissued to another process of the machine is not counted twice and a
# storm child is not counted because an unrelated process had its pid.
# With the supervisor's output, children are also paired exactly by start
# token (fork and exit of the same instance), which forkstat cannot give.
# forkstat resolves a fork's parent from /proc after the fact and prints
# parent 0 for a child that has already exited: such forks count as
# reported (the child pid is right) and are tallied as misparented.
#
# Prints one line of key=value pairs:
#   children forked exited reported paired misparented events lost
BEGIN {
	n = split(workers, w, ",")
	for (i = 1; i <= n; i++)
		isworker[w[i]] = 1
}
FNR == NR {
	if ($1 != "")
		storm[$1]++
	children++
	next
}
fmt == "supervisor" {
	kind = ""; pid = ""; ppid = ""; tok = ""; count = 0
	m = split($0, f, ",")
	for (i = 1; i <= m; i++) {
		if (f[i] ~ /^\{?"kind":/) { kind = f[i]; sub(/^\{?"kind":"/, "", kind); sub(/".*/, "", kind) }
		else if (f[i] ~ /^"pid":/) { pid = substr(f[i], 7) }
		else if (f[i] ~ /^"ppid":/) { ppid = substr(f[i], 8) }
		else if (f[i] ~ /^"token":/) { tok = substr(f[i], 9) }
		else if (f[i] ~ /^"count":/) { count = f[i]; sub(/^"count":/, "", count); sub(/\}.*/, "", count) }
	}
	if (kind == "lost") { lost += count; next }
	if (kind == "") next
	events++
	if (!(ppid in isworker) || !(pid in storm)) next
	# A null token (netlink: exits, and forks of children gone before
	# their token was read) pairs nothing.
	if (kind == "fork") { forks[pid]++; if (tok != "null") ftok[pid SUBSEP tok] = 1 }
	else if (kind == "exit") { exits[pid]++; if (tok != "null") etok[pid SUBSEP tok] = 1 }
	next
}
fmt == "forkstat" {
	# hh:mm:ss fork PID parent|child NAME... / hh:mm:ss exit PID CODE DURATION NAME...
	if ($1 !~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/) next
	if ($2 == "fork" && $4 == "parent") { parent = $3; events++; next }
	if ($2 == "fork" && $4 == "child") {
		# forkstat looks the parent up in /proc after the event; for a
		# child that is already gone it prints parent 0 ([swapper]).
		# The fork itself was reported, so it counts, and is tallied.
		if ($3 in storm && ((parent in isworker) || parent == "0")) {
			forks[$3]++
			if (parent == "0") misparented++
		}
		parent = ""
		next
	}
	if ($2 == "exit") {
		events++
		if ($3 in storm) exits[$3]++
		next
	}
	if ($2 != "") events++
	next
}
END {
	for (p in storm) {
		k = storm[p]
		a = (p in forks) ? forks[p] : 0
		b = (p in exits) ? exits[p] : 0
		forked += (a < k) ? a : k
		exited += (b < k) ? b : k
		c = (a < b) ? a : b
		reported += (c < k) ? c : k
	}
	for (key in ftok)
		if (key in etok) { split(key, pk, SUBSEP); pairs[pk[1]]++ }
	for (p in pairs)
		paired += (pairs[p] < storm[p]) ? pairs[p] : storm[p]
	printf "children=%d forked=%d exited=%d reported=%d paired=%d misparented=%d events=%d lost=%d\n",
		children, forked, exited, reported, (fmt == "supervisor") ? paired : -1, misparented, events, lost
}
