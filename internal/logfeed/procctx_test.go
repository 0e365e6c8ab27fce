package logfeed

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/userdb"
)

const testContainerID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// contextEvents are a fork and an exec with every piece of context the
// eBPF source fills, for the child of pe; the exec's argv is cut.
func contextEvents(pe *procEvents) []events.Event {
	leader := token.Token{Boot: pe.child.Boot, Start: 3, Ino: 33, Prec: token.Ticks}
	ctx := events.Context{Valid: true, UID: 1000, EUID: 0, SUID: 1001, GID: 100, EGID: 101, SGID: 102,
		Groups: [events.MaxGroups]uint32{4, 24, 27}, NGroups: 3, Audit: true, LoginUID: 1000, AuditSession: 7,
		SID: 300, PGID: pe.childPid, SessionLeader: leader, GroupLeader: pe.child,
		TTY: true, StdTTY: true, TTYMajor: 136, TTYMinor: 5, CgroupID: 4242, NSPid: 1, PidNS: 4026532281, MntNS: 4026532282}
	ppid := int32(os.Getpid())
	fork := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pe.childPid, PPid: ppid,
		Token: pe.child, ParentToken: pe.parent, Comm: [16]byte{'s', 'h'}, Ctx: ctx}
	fork.Ctx.PGID, fork.Ctx.GroupLeader = 300, leader
	exec := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: pe.childPid, PPid: ppid,
		Token: pe.child, ParentToken: pe.parent, Comm: [16]byte{'e', 'n', 'v'},
		Exe: "/usr/bin/env", Argv: []string{"env", "a b", "", "x\ny"}, Ctx: ctx,
		Exec: events.ExecInfo{Cwd: "/home/u/w", Cgroup: "/system.slice/docker-" + testContainerID + ".scope",
			ContainerID: testContainerID, ContainerRuntime: "docker", ArgsCount: 9, ArgsSize: 70000, ArgsTruncated: true,
			ExeDeleted: true, CwdDeleted: true}}
	fork.Parent = &events.Desc{Comm: [16]byte{'i', 'n', 'i', 't'}}
	pctx := ctx
	pctx.EUID, pctx.UID, pctx.EGID, pctx.NSPid, pctx.StdTTY = 1000, 1000, 100, 7, false
	exec.Parent = &events.Desc{Comm: [16]byte{'b', 'a', 's', 'h'}, Exe: "/usr/bin/bash",
		Argv: []string{"bash", "--token=[REDACTED]"}, Ctx: pctx,
		Exec: events.ExecInfo{Cwd: "/home/u", ArgsCount: 2, ArgsRedacted: true, Cgroup: "/user.slice", CwdDeleted: true}}
	exec.Exec.ArgsRedacted = true
	return []events.Event{fork, exec}
}

// TestContextLines checks the values the context gives the ECS and OCSF
// process lines.
func TestContextLines(t *testing.T) {
	pe := &procEvents{childPid: 4321, child: token.Token{Start: 99, Ino: 77, Prec: token.Ticks}}
	evs := contextEvents(pe)
	leader := evs[1].Ctx.SessionLeader.String()
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: AllKinds,
			Names: userdb.New("../userdb/testdata/passwd", "../userdb/testdata/group")})
		for i := range evs {
			l.Event(&evs[i])
		}
		flush(t, l)
		lines := out.lines(t)
		if len(lines) != 2 {
			t.Fatalf("%s: %d lines, want 2", schema, len(lines))
		}
		fork, exec := lines[0], lines[1]
		var want map[string]any
		if schema == SchemaECS {
			want = map[string]any{
				"process.args":                                []any{"env", "a b", "", "x\ny"},
				"process.args_count":                          9.0,
				"process.command_line":                        "env a b  x\ny",
				"process.executable":                          "/usr/bin/env",
				"process.working_directory":                   "/home/u/w",
				"process.user.id":                             "0",
				"process.user.name":                           "root",
				"process.real_user.name":                      "alice",
				"process.real_user.id":                        "1000",
				"process.saved_user.id":                       "1001",
				"process.group.id":                            "101",
				"process.real_group.id":                       "100",
				"process.saved_group.id":                      "102",
				"process.supplemental_groups":                 []any{map[string]any{"id": "4", "name": "adm"}, map[string]any{"id": "24"}, map[string]any{"id": "27", "name": "sudo"}},
				"process.session_leader.pid":                  300.0,
				"process.session_leader.entity_id":            leader,
				"process.group_leader.pid":                    4321.0,
				"process.group_leader.entity_id":              pe.child.String(),
				"process.tty.char_device.major":               136.0,
				"process.tty.char_device.minor":               5.0,
				"process.interactive":                         true,
				"process.vpid":                                1.0,
				"container.id":                                testContainerID,
				"container.runtime":                           "docker",
				"supervisor.audit_login_uid":                  1000.0,
				"supervisor.audit_session_id":                 7.0,
				"supervisor.args_truncated":                   true,
				"supervisor.args_size":                        70000.0,
				"supervisor.cgroup_id":                        4242.0,
				"supervisor.cgroup":                           evs[1].Exec.Cgroup,
				"supervisor.pid_ns":                           4026532281.0,
				"supervisor.mnt_ns":                           4026532282.0,
				"supervisor.executable_deleted":               true,
				"supervisor.working_directory_deleted":        true,
				"supervisor.parent.working_directory_deleted": true,
				"supervisor.args_redacted":                    true,
				"process.parent.pid":                          float64(os.Getpid()),
				"process.parent.name":                         "bash",
				"process.parent.executable":                   "/usr/bin/bash",
				"process.parent.args":                         []any{"bash", "--token=[REDACTED]"},
				"process.parent.args_count":                   2.0,
				"process.parent.command_line":                 "bash --token=[REDACTED]",
				"process.parent.working_directory":            "/home/u",
				"process.parent.user.id":                      "1000",
				"process.parent.user.name":                    "alice",
				"process.parent.real_user.id":                 "1000",
				"process.parent.group.id":                     "100",
				"process.parent.group_leader.pid":             4321.0,
				"process.parent.group_leader.entity_id":       pe.child.String(),
				"process.parent.interactive":                  false,
				"process.parent.vpid":                         7.0,
				"supervisor.parent.args_redacted":             true,
			}
			checkField(t, "ecs fork", fork, "process.parent.name", "init")
			for _, k := range []string{"process.parent.executable", "process.parent.args", "process.parent.user.id", "process.parent.session_leader"} {
				if _, ok := get(fork, k); ok {
					t.Errorf("ecs fork line has %s: the parent's exec was not seen", k)
				}
			}
			if _, ok := get(exec, "process.parent.session_leader"); ok {
				t.Error("ecs exec line has process.parent.session_leader: ECS has no such field")
			}
			for k, v := range map[string]any{"process.group_leader.pid": 300.0, "process.user.id": "0", "process.session_leader.entity_id": leader} {
				checkField(t, schema+" fork", fork, k, v)
			}
			for _, k := range []string{"process.args", "process.working_directory", "container.id", "supervisor.args_truncated", "supervisor.executable_deleted"} {
				if _, ok := get(fork, k); ok {
					t.Errorf("ecs fork line has %s", k)
				}
			}
		} else {
			want = map[string]any{
				"process.cmd_line":                          "env a b  x\ny",
				"process.file.path":                         "/usr/bin/env",
				"process.working_directory":                 "/home/u/w",
				"process.user.uid":                          "0",
				"process.user.name":                         "root",
				"process.user.groups":                       []any{map[string]any{"uid": "4", "name": "adm"}, map[string]any{"uid": "24"}, map[string]any{"uid": "27", "name": "sudo"}},
				"process.session.uid":                       "300",
				"process.session.uid_alt":                   leader,
				"process.session.terminal":                  "pts/5",
				"process.container.uid":                     testContainerID,
				"process.namespace_pid":                     1.0,
				"unmapped.real_uid":                         "1000",
				"unmapped.saved_uid":                        "1001",
				"unmapped.gid":                              "101",
				"unmapped.pgid":                             4321.0,
				"unmapped.group_leader_uid":                 pe.child.String(),
				"unmapped.audit_login_uid":                  1000.0,
				"unmapped.args_truncated":                   true,
				"unmapped.args_redacted":                    true,
				"unmapped.pid_ns":                           4026532281.0,
				"unmapped.mnt_ns":                           4026532282.0,
				"unmapped.executable_deleted":               true,
				"unmapped.working_directory_deleted":        true,
				"unmapped.parent.working_directory_deleted": true,
				"process.parent_process.name":               "bash",
				"process.parent_process.cmd_line":           "bash --token=[REDACTED]",
				"process.parent_process.file.path":          "/usr/bin/bash",
				"process.parent_process.user.uid":           "1000",
				"process.parent_process.working_directory":  "/home/u",
				"unmapped.parent.args_redacted":             true,
			}
			checkField(t, "ocsf fork", fork, "process.parent_process.name", "init")
		}
		for k, v := range want {
			checkField(t, schema+" exec", exec, k, v)
		}
	}
}

func checkField(t *testing.T, what string, line map[string]any, k string, want any) {
	t.Helper()
	got, ok := get(line, k)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !ok || string(g) != string(w) {
		t.Errorf("%s: %s = %s (%v), want %s", what, k, g, ok, w)
	}
}

// TestCommandLineCut checks that command_line is cut at DefaultArgsBytes.
func TestCommandLineCut(t *testing.T) {
	long := strings.Repeat("a", DefaultArgsBytes)
	if got := commandLine(nil, []string{"x", long}, DefaultArgsBytes); len(got) != DefaultArgsBytes || string(got[:2]) != "x " {
		t.Errorf("commandLine cut to %d bytes %q..., want %d", len(got), got[:2], DefaultArgsBytes)
	}
}

// TestAppendTTY checks the terminal names of the OCSF session.
func TestAppendTTY(t *testing.T) {
	for _, tt := range []struct {
		major, minor uint32
		want         string
	}{
		{136, 5, "pts/5"},
		{137, 1, "pts/257"},
		{4, 1, "tty1"},
		{4, 64, "ttyS0"},
		{4, 65, "ttyS1"},
		{5, 1, "5:1"},
	} {
		if got := string(appendTTY(nil, tt.major, tt.minor)); got != tt.want {
			t.Errorf("appendTTY(%d, %d) = %q, want %q", tt.major, tt.minor, got, tt.want)
		}
	}
}

// TestInvalidUTF8Marked: a text with bytes that are not UTF-8 is written
// with U+FFFD in their place, which decodes as a real U+FFFD does: the
// line names those fields, ECS and OCSF. Before, an executable
// /tmp/\xff and one named /tmp/\u00ef\u00bf\u00bd's bytes (U+FFFD) gave the
// same line. A text cut inside a character (the kernel's 15-byte name, the
// arguments at DefaultArgsBytes) is not one: the cut is what made it so.
func TestInvalidUTF8Marked(t *testing.T) {
	bad := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 7, PPid: 6,
		Exe: "/tmp/\xff", Argv: []string{"x", "a\xc0\xafb"},
		Exec:   events.ExecInfo{Cwd: "/home/\xed\xa0\x80", Cgroup: "/x\xfe"},
		Parent: &events.Desc{Exe: "/bin/sh", Argv: []string{"sh"}, Exec: events.ExecInfo{Cwd: "/\x80"}}}
	copy(bad.Comm[:], "n\xff")
	copy(bad.Parent.Comm[:], "sh")
	good := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 8, PPid: 6,
		Exe: "/tmp/\uFFFD", Argv: []string{"abc", strings.Repeat("é", DefaultArgsBytes)}, // cut inside an é
		Exec:   events.ExecInfo{Cwd: "/home/\u2028", Cgroup: "/"},
		Parent: &events.Desc{Exe: "/bin/é", Argv: []string{"\uFFFD"}}}
	copy(good.Comm[:15], strings.Repeat("é", 8)) // the kernel's cut, inside the 8th
	short := events.Event{Kind: events.Exec, Pid: 9, PPid: 6, Argv: []string{"x"}}
	copy(short.Comm[:], "n\xc3") // not cut: 2 bytes
	want := map[string][]any{
		SchemaECS: {"process.name", "process.executable", "process.args", "process.command_line",
			"process.working_directory", "process.parent.working_directory", "supervisor.cgroup"},
		SchemaOCSF: {"process.name", "process.file.path", "process.file.name", "process.cmd_line",
			"process.working_directory", "process.parent_process.working_directory", "unmapped.cgroup"},
	}
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		lines, ns := linesOf(t, schema, &bad, &good, &short)
		key := ns + "invalid_utf8"
		if got, _ := get(lines[2], key); !reflect.DeepEqual(got, []any{"process.name"}) {
			t.Errorf("%s: a 2-byte name ending in the start of a character: %s = %v, want [process.name]", schema, key, got)
		}
		if got, _ := get(lines[0], key); !reflect.DeepEqual(got, want[schema]) {
			t.Errorf("%s: %s = %v, want %v", schema, key, got, want[schema])
		}
		if got, ok := get(lines[1], key); ok {
			t.Errorf("%s: UTF-8 texts have %s = %v", schema, key, got)
		}
	}
}

// TestContainerFromCutPath: the container a mechanism named is written
// even when the cgroup path it kept is cut below the container's scope
// (a process nested past the eBPF walk's bound: the id came from the top
// levels the program read beside the path). The ECS line once re-derived
// the id from the kept path, found none there, and wrote no container.
func TestContainerFromCutPath(t *testing.T) {
	ev := events.Event{Kind: events.Exec, Pid: 9, Mechanism: events.EBPF, Argv: []string{"true"},
		Exec: events.ExecInfo{Cgroup: "n30/n31", CgroupTruncated: true,
			ContainerID: testContainerID, ContainerRuntime: "docker"}}
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		lines, _ := linesOf(t, schema, &ev)
		want := map[string]any{"container.id": testContainerID, "container.runtime": "docker"}
		if schema == SchemaOCSF {
			want = map[string]any{"process.container.uid": testContainerID}
		}
		for k, v := range want {
			if got, _ := get(lines[0], k); got != v {
				t.Errorf("%s: %s = %v, want %v", schema, k, got, v)
			}
		}
	}
}

// TestContextPartsAbsent: a part of the context a source knows to be
// absent (events.Context.Drop) leaves out every field of that part, in the
// process and parent objects of both schemas, keeps the other parts, and
// is named in context_absent.
func TestContextPartsAbsent(t *testing.T) {
	type fields struct{ ids, session, kept []string }
	schemas := map[string]fields{
		SchemaECS: {
			ids: []string{"process.user.id", "process.real_user.id", "process.saved_user.id", "process.group.id",
				"process.real_group.id", "process.saved_group.id", "process.supplemental_groups",
				"process.parent.user.id", "process.parent.real_user.id", "process.parent.group.id"},
			session: []string{"process.session_leader", "process.group_leader", "process.tty", "process.interactive",
				"process.parent.group_leader", "process.parent.interactive"},
			kept: []string{"process.vpid", "process.parent.vpid", "container.id", "supervisor.cgroup_id",
				"supervisor.pid_ns", "supervisor.mnt_ns", "supervisor.audit_login_uid", "process.working_directory"},
		},
		SchemaOCSF: {
			ids:     []string{"process.user", "unmapped.real_uid", "unmapped.saved_uid", "unmapped.gid", "process.parent_process.user"},
			session: []string{"process.session", "unmapped.pgid", "unmapped.group_leader_uid"},
			kept:    []string{"process.namespace_pid", "process.container.uid", "unmapped.cgroup_id", "unmapped.pid_ns", "unmapped.mnt_ns", "unmapped.audit_login_uid"},
		},
	}
	for _, tc := range []struct {
		name   string
		absent events.CtxPart
		want   []any
	}{
		{"ids", events.CtxIDs, []any{"ids"}},
		{"session", events.CtxSession, []any{"session"}},
		{"both", events.CtxIDs | events.CtxSession, []any{"ids", "session"}},
	} {
		for schema, f := range schemas {
			t.Run(tc.name+"/"+schema, func(t *testing.T) {
				pe := &procEvents{childPid: 4321, child: token.Token{Start: 99, Ino: 77, Prec: token.Ticks}}
				ev := contextEvents(pe)[1]
				ev.Ctx.Drop(tc.absent)
				parent := *ev.Parent
				parent.Ctx.Drop(tc.absent)
				ev.Parent = &parent
				l, out := newTestLogger(t, Config{Schema: schema, ProcessEvents: AllKinds,
					Names: userdb.New("../userdb/testdata/passwd", "../userdb/testdata/group")})
				l.Event(&ev)
				flush(t, l)
				lines := out.lines(t)
				if len(lines) != 1 {
					t.Fatalf("%d lines, want 1", len(lines))
				}
				line := lines[0]
				var gone []string
				kept := append([]string(nil), f.kept...)
				if tc.absent&events.CtxIDs != 0 {
					gone = append(gone, f.ids...)
				} else {
					kept = append(kept, f.ids...)
				}
				if tc.absent&events.CtxSession != 0 {
					gone = append(gone, f.session...)
				} else {
					kept = append(kept, f.session...)
				}
				for _, k := range gone {
					if v, ok := get(line, k); ok {
						t.Errorf("%s = %v written, its part is absent", k, v)
					}
				}
				for _, k := range kept {
					if _, ok := get(line, k); !ok {
						t.Errorf("%s missing, its part is known", k)
					}
				}
				ns := "supervisor."
				if schema == SchemaOCSF {
					ns = "unmapped."
				}
				checkField(t, schema, line, ns+"context_absent", tc.want)
				checkField(t, schema, line, ns+"parent.context_absent", tc.want)
			})
		}
	}
}
