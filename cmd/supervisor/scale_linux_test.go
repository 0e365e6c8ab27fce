package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestScale measures what a request costs as live claims grow: verify,
// get, list (one page), kill and release at each size, a reconcile pass
// (a dry-run reap judges every claim), the daemon's RSS and descriptors.
// It runs only when SUPERVISOR_SCALE names the sizes (scripts/scale.sh):
// it is a measurement, not a check, and it starts up to 10,000 processes.
func TestScale(t *testing.T) {
	sizes := os.Getenv("SUPERVISOR_SCALE")
	if sizes == "" {
		t.Skip("a measurement: set SUPERVISOR_SCALE=10,1000,10000 (scripts/scale.sh)")
	}
	testenv.RequireRoot(t)
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--reap-interval", "1h", "--log-output", "file:/dev/null")
	ctx := context.Background()
	st, err := d.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var claims []api.Claim
	var mu sync.Mutex
	grow := func(n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for len(claims) < n {
			need := n - len(claims)
			for range need {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					c := api.NewClient(sock)
					defer c.Close()
					cl, err := c.Launch(ctx, &api.LaunchRequest{Argv: []string{"sleep", "3600"}, Cwd: "/"})
					if err != nil {
						t.Errorf("launch: %v", err)
						return
					}
					mu.Lock()
					claims = append(claims, cl)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
		}
	}
	median := func(n int, op func(i int)) time.Duration {
		ds := make([]time.Duration, n)
		for i := range n {
			t0 := time.Now()
			op(i)
			ds[i] = time.Since(t0)
		}
		slices.Sort(ds)
		return ds[n/2]
	}
	t.Logf("%8s %10s %10s %10s %10s %10s %12s %9s %5s", "claims", "verify", "get", "list-page", "kill", "release", "reconcile", "RSS-MiB", "fds")
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 20 {
			t.Fatalf("size %q: want at least 20", f)
		}
		grow(n)
		verify := median(50, func(i int) {
			c := claims[i*7%len(claims)]
			if _, err := d.client.Verify(ctx, c.Pid, c.Token); err != nil {
				t.Error(err)
			}
		})
		get := median(50, func(i int) {
			if _, err := d.client.Get(ctx, claims[i*11%len(claims)].ID); err != nil {
				t.Error(err)
			}
		})
		page := median(20, func(int) {
			if _, _, err := d.client.ListPage(ctx, api.ListQuery{Limit: 100}); err != nil {
				t.Error(err)
			}
		})
		zero := time.Duration(0)
		kill := median(10, func(int) {
			c := claims[len(claims)-1]
			claims = claims[:len(claims)-1]
			if _, err := d.client.Kill(ctx, c.Pid, c.Token, &zero); err != nil {
				t.Error(err)
			}
		})
		g := api.Duration(0)
		release := median(10, func(int) {
			c := claims[len(claims)-1]
			claims = claims[:len(claims)-1]
			if _, err := d.client.Release(ctx, c.ID, &api.ReleaseRequest{Grace: &g}); err != nil {
				t.Error(err)
			}
		})
		t0 := time.Now()
		rep, err := d.client.Reap(ctx, true)
		reconcile := time.Since(t0)
		if err != nil || rep.Seen < len(claims) {
			t.Errorf("dry-run reap: %+v, %v", rep.Seen, err)
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", st.Pid))
		t.Logf("%8d %10v %10v %10v %10v %10v %12v %9.1f %5d", n, verify, get, page, kill, release, reconcile,
			float64(rssKiB(st.Pid))/1024, len(fds))
		grow(n)
	}
	for _, c := range claims {
		g := api.Duration(0)
		d.client.Release(ctx, c.ID, &api.ReleaseRequest{Grace: &g})
	}
}
