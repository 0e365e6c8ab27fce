package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/token"
)

// TestStreamLentImage publishes, through the exec cache as the daemon runs
// it, the forks of two programs to a user's stream: a root program with a
// password on its command line that dropped to the user (setresuid, no
// exec) and then forked, and the user's own shell. The user never sees
// the root program's executable or arguments, on the fork or as the
// parent of the fork's child, with or without hidepid; the shell's fork
// shows the user its image; root sees both whole.
func TestStreamLentImage(t *testing.T) {
	ids := func(uid uint32, nspid int32) events.Context {
		return events.Context{Valid: true, UID: uid, EUID: uid, SUID: uid, GID: uid, EGID: uid, SGID: uid, NSPid: nspid}
	}
	ptok := func(n uint64) token.Token { return token.Token{Start: n, Ino: n, Prec: token.Ticks} }
	init1 := ptok(1)
	secretd := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 100, Token: ptok(100), PPid: 1, ParentToken: init1,
		Exe: "/usr/sbin/secretd", Argv: []string{"secretd", "--password=S3CRET"}, Exec: events.ExecInfo{ArgsCount: 2}, Ctx: ids(0, 100)}
	shell := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 200, Token: ptok(200), PPid: 1, ParentToken: init1,
		Exe: "/bin/sh", Argv: []string{"sh", "-c", "make"}, Exec: events.ExecInfo{ArgsCount: 3}, Ctx: ids(1000, 200)}
	fork := func(pid int32, parent *events.Event) events.Event {
		return events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pid, Token: ptok(uint64(pid)),
			PPid: parent.Pid, ParentToken: parent.Token, Ctx: ids(1000, pid)}
	}
	worker := fork(101, &secretd) // after the drop to uid 1000
	grandchild := fork(102, &worker)
	sub := fork(201, &shell)

	var h hub
	subs := subscribeAll(t, &h, map[string]viewer{
		"root":          {uid: 0, all: true},
		"user":          {uid: 1000, gid: 1000},
		"user, hidepid": {uid: 1000, gid: 1000, hidden: true},
	})
	c := execcache.New(execcache.Config{})
	for _, ev := range []*events.Event{&secretd, &shell, &worker, &grandchild, &sub} {
		c.Observe(ev)
		if ev.Kind == events.Fork {
			h.publishEvent(h.active(), ev, attribution{uid: 1000, uidOK: true})
		}
	}
	records := func(s *subscriber) map[float64]map[string]any {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		b, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[float64]map[string]any{}
		for l := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("record %q: %v", l, err)
			}
			out[r["pid"].(float64)] = r
		}
		return out
	}
	withheld := func(r map[string]any) []string {
		var w []string
		for _, x := range r["withheld"].([]any) {
			w = append(w, x.(string))
		}
		return w
	}
	for name, s := range subs {
		rs := records(s)
		if len(rs) != 3 {
			t.Fatalf("%s: %d records, want 3: %v", name, len(rs), rs)
		}
		for _, pid := range []float64{101, 102} {
			raw, _ := json.Marshal(rs[pid])
			if name == "root" {
				if rs[pid]["exe"] != "/usr/sbin/secretd" || !strings.Contains(string(raw), "S3CRET") {
					t.Errorf("root: fork %v: %s, want secretd's image whole", pid, raw)
				}
				continue
			}
			if strings.Contains(string(raw), "secretd\"") || strings.Contains(string(raw), "S3CRET") {
				t.Errorf("%s: fork %v shows the root program's image: %s", name, pid, raw)
			}
			if w := withheld(rs[pid]); !slices.Contains(w, "exe") || !slices.Contains(w, "argv") {
				t.Errorf("%s: fork %v withheld %v, want exe and argv named", name, pid, w)
			}
		}
		if name == "user" || name == "root" {
			// The user's own shell, forked with the ids it exec'd with.
			r := rs[201]
			var w []string
			if r["withheld"] != nil {
				w = withheld(r)
			}
			if r["exe"] != "/bin/sh" || !strings.Contains(fmt.Sprint(r["argv"]), "make") || slices.Contains(w, "exe") || slices.Contains(w, "argv") {
				t.Errorf("%s: the shell's fork %v, want its image", name, r)
			}
		}
	}
}
