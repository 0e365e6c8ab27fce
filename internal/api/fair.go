package api

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"time"
)

// Limits are the server's fairness limits: what one uid may hold of the
// daemon's connections and request rate. Root has connection slots of its
// own and no rate cap. A zero field takes its value from DefaultLimits.
type Limits struct {
	// UserConns caps the connections one non-root uid has served at once;
	// SharedConns caps those of all non-root uids together. RootConns are
	// root's own: no other uid can take them.
	UserConns   int `json:"user_conns"`
	SharedConns int `json:"shared_conns"`
	RootConns   int `json:"root_conns"`
	// ConnWait is how long a connection over its uid's cap (or the shared
	// cap) waits, unserved, for a slot before it is answered 503;
	// RootConnWait is root's (root waits only for its own connections).
	ConnWait     Duration `json:"conn_wait"`
	RootConnWait Duration `json:"root_conn_wait"`
	// IdleTimeout closes a keep-alive connection with no request in flight.
	IdleTimeout Duration `json:"idle_timeout"`
	// RequestTimeout bounds the writing of a short request's answer (from
	// the end of its headers); a long-lived request has MaxGrace more.
	RequestTimeout Duration `json:"request_timeout"`
	// UserLong caps the long-lived requests of one non-root uid in flight
	// at once, of each class: releases and kills (they wait out a grace
	// period), and event streams, so that streams left open never take a
	// user's room to release. They are exempt from RequestTimeout and,
	// being in flight, from IdleTimeout; they count among the uid's
	// connections.
	UserLong int `json:"user_long"`
	// Rate is the requests per second each non-root uid may make over time
	// and Burst how many at once (a token bucket); over it, 429.
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

// DefaultLimits are the limits a Server takes when none are given.
//
// A CLI call uses one connection and one request and a Go client keeps two
// idle, so 16 connections a uid leave room for a busy script, and 256
// shared need 16 uids at their cap to fill; a uid kept waiting by the
// shared cap then takes an idle keep-alive connection's slot from the
// uid holding the most (gate.reclaimLocked), so that those 16 cannot keep
// the others out. Root keeps the 64 every caller
// had before. A keep-alive connection idle for 10 s is closed (the Client
// drops its own after 5 s, before the server does). 100 requests a second,
// 200 at once, is more than any interactive use and bounds a loop.
var DefaultLimits = Limits{
	UserConns:      16,
	SharedConns:    256,
	RootConns:      64,
	ConnWait:       Duration(5 * time.Second),
	RootConnWait:   Duration(time.Minute),
	IdleTimeout:    Duration(10 * time.Second),
	RequestTimeout: Duration(2 * time.Minute),
	UserLong:       4,
	Rate:           100,
	Burst:          200,
}

// withDefaults fills the zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pickD := func(v *Duration, def Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.UserConns, d.UserConns)
	pick(&l.SharedConns, d.SharedConns)
	pick(&l.RootConns, d.RootConns)
	pick(&l.UserLong, d.UserLong)
	pick(&l.Burst, d.Burst)
	pickD(&l.ConnWait, d.ConnWait)
	pickD(&l.RootConnWait, d.RootConnWait)
	pickD(&l.IdleTimeout, d.IdleTimeout)
	pickD(&l.RequestTimeout, d.RequestTimeout)
	if l.Rate <= 0 || math.IsNaN(l.Rate) {
		l.Rate = d.Rate
	}
	return l
}

// noPeer is the accounting key of a connection without peer credentials
// ((uid_t)-1 is no uid): it is served as a user, and answered 403.
const noPeer = math.MaxUint32

// gate is the server's listener. Its own goroutine accepts every
// connection at once (the kernel's backlog never fills behind a busy
// uid) and reads the peer's uid (SO_PEERCRED); a goroutine of that uid
// reads the rest of the peer (accepted), and the gate then serves it,
// parks it until a slot of its uid frees (ConnWait at most), or hands the
// it to the server marked refused, which answers 503 to its first request. The
// connections a uid holds in each state are capped, so a uid costs the
// daemon a bounded number of descriptors; beyond, a connection is closed
// unanswered. One uid's connections never wait for another's, except
// for the shared slots of non-root uids, and then ConnWait at most.
type gate struct {
	inner net.Listener
	// more are further listeners (the private socket), each accepted by
	// a loop of its own: a backlog the shared socket's callers fill
	// does not hold their connections back.
	more []net.Listener
	lim  Limits

	mu       sync.Mutex
	users    map[uint32]*connUser
	shared   int      // non-root connections served
	parked   int      // non-root connections waiting
	refusing int      // connections handed over to be refused
	turn     []uint32 // uids with parked connections, in round-robin order
	ready    []*gateConn
	// unread are the connections accepted whose peer is being read, by
	// the uid SO_PEERCRED names (or whose subordinate uid it is);
	// unreadShared counts those of non-root uids.
	unread       map[uint32]*unreadUser
	unreadShared int
	err          error         // set when the accept loop ends
	wake         chan struct{} // one token: ready or err changed
}

// connUser is one uid's connections.
type connUser struct {
	served, refusing int
	queue            []*gateConn // parked, oldest first
	// idle are its served keep-alive connections between requests,
	// longest idle first: what reclaim may close.
	idle []*gateConn
}

type connState int

const (
	connNew connState = iota
	connParked
	connServed
	connRefused
	connClosed
)

// gateConn is a connection through the gate: the peer read at accept,
// and, when refused, why.
type gateConn struct {
	net.Conn
	g       *gate
	peer    Peer
	hasPeer bool
	key     uint32

	// Under g.mu.
	state  connState
	timer  *time.Timer
	refuse string
	// idle: served and between requests (the server's ConnState);
	// reclaimed: closed by reclaim, its slot not yet given back.
	idle, reclaimed bool
}

func newGate(l net.Listener, lim Limits, more ...net.Listener) *gate {
	return &gate{inner: l, more: more, lim: lim, users: map[uint32]*connUser{}, unread: map[uint32]*unreadUser{}, wake: make(chan struct{}, 1)}
}

// Accept returns the next connection to serve (or to refuse). Only the
// server's own loop calls it.
func (g *gate) Accept() (net.Conn, error) {
	for {
		g.mu.Lock()
		if err := g.err; err != nil {
			g.mu.Unlock()
			return nil, err
		}
		if len(g.ready) > 0 {
			c := g.ready[0]
			g.ready[0] = nil
			g.ready = g.ready[1:]
			g.mu.Unlock()
			return c, nil
		}
		g.mu.Unlock()
		<-g.wake
	}
}

// Close closes the listener, which ends the accept loop, and the
// connections not yet handed to the server.
func (g *gate) Close() error {
	err := g.inner.Close()
	for _, l := range g.more {
		l.Close()
	}
	g.mu.Lock()
	if g.err == nil {
		g.err = net.ErrClosed
	}
	var drop []*gateConn
	for _, u := range g.users {
		drop = append(drop, u.queue...)
	}
	drop = append(drop, g.ready...)
	g.ready = nil
	// A reader admits the peer it is reading, which closes it now; the
	// connections it has not begun are closed here.
	var unread []unreadConn
	for _, u := range g.unread {
		unread = append(unread, u.queue...)
		u.queue = nil
	}
	g.unreadShared = 0
	g.mu.Unlock()
	g.signal()
	for _, c := range drop {
		c.Close()
	}
	for _, uc := range unread {
		uc.r.drop()
		uc.c.Close()
	}
	return err
}

// Addr implements net.Listener.
func (g *gate) Addr() net.Addr { return g.inner.Addr() }

// loop accepts from every listener until they are closed.
func (g *gate) loop() {
	for _, l := range g.more {
		go g.acceptFrom(l, false)
	}
	g.acceptFrom(g.inner, true)
}

// acceptFrom accepts from l until it is closed; the main listener's end
// (main) ends the gate. A failed accept (out of descriptors) is retried
// after a pause that doubles up to a second.
func (g *gate) acceptFrom(l net.Listener, main bool) {
	var pause time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				if !main {
					return
				}
				g.mu.Lock()
				if g.err == nil {
					g.err = err
				}
				g.mu.Unlock()
				g.signal()
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		g.accepted(c)
	}
}

// accepted is the accept loop's work for one connection: what admission
// needs and no more. It reads the peer's uid (SO_PEERCRED, one syscall)
// and queues the connection for the reader of that uid, which reads the
// rest of the peer (some tens of microseconds: a pidfd, user namespace
// ioctls, a stat in /proc) and admits it. Each uid's peers are read one
// at a time, so a uid that connects in a loop costs the daemon one
// goroutine's worth of reads at most, and while its queue is full its
// new connections are closed at once; the loop itself keeps up with the
// backlog. A connection without peer credentials is admitted at once.
func (g *gate) accepted(c net.Conn) {
	r, err := startPeer(c)
	if err != nil {
		g.admit(&gateConn{Conn: c, g: g, key: noPeer})
		return
	}
	key := r.share()
	g.mu.Lock()
	u := g.unread[key]
	if u == nil {
		u = &unreadUser{}
		g.unread[key] = u
	}
	limit := maxUnread * g.lim.UserConns
	if key == 0 {
		limit = 16 * g.lim.RootConns
	}
	if g.err != nil || len(u.queue) >= limit || key != 0 && g.unreadShared >= maxUnread*g.lim.SharedConns {
		if !u.reading && len(u.queue) == 0 {
			delete(g.unread, key)
		}
		g.mu.Unlock()
		r.drop()
		c.Close()
		return
	}
	u.queue = append(u.queue, unreadConn{c, r})
	if key != 0 {
		g.unreadShared++
	}
	start := !u.reading
	u.reading = true
	g.mu.Unlock()
	if start {
		go g.readPeers(key, u)
	}
}

// maxUnread is how many connections of a uid (of all non-root uids
// together, times SharedConns) may wait to have their peer read, times
// its connection cap. Beyond, they are closed unanswered: only a uid that
// connects faster than its peers can be read gets there.
const maxUnread = 4

// unreadUser is one uid's connections accepted and not yet admitted: its
// reader reads them in turn.
type unreadUser struct {
	reading bool
	queue   []unreadConn
}

type unreadConn struct {
	c net.Conn
	r peerRead
}

// readPeers reads the peers queued for key, oldest first, and admits
// their connections, until the queue is empty.
func (g *gate) readPeers(key uint32, u *unreadUser) {
	for {
		g.mu.Lock()
		if len(u.queue) == 0 {
			u.reading = false
			delete(g.unread, key)
			g.mu.Unlock()
			return
		}
		uc := u.queue[0]
		u.queue[0] = unreadConn{}
		u.queue = u.queue[1:]
		if key != 0 {
			g.unreadShared--
		}
		g.mu.Unlock()
		p := uc.r.finish(uc.c)
		g.admit(&gateConn{Conn: uc.c, g: g, peer: p, hasPeer: true, key: p.Share()})
	}
}

func (g *gate) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *gate) user(key uint32) *connUser {
	u := g.users[key]
	if u == nil {
		u = &connUser{}
		g.users[key] = u
	}
	return u
}

// forget drops the entry of a uid that holds nothing.
func (g *gate) forget(key uint32) {
	if u := g.users[key]; u != nil && u.served == 0 && u.refusing == 0 && len(u.queue) == 0 {
		delete(g.users, key)
	}
}

// canServe reports whether a connection of key may be served now.
func (g *gate) canServe(key uint32) bool {
	u := g.user(key)
	if key == 0 {
		return u.served < g.lim.RootConns
	}
	return u.served < g.lim.UserConns && g.shared < g.lim.SharedConns
}

// admit serves, parks or refuses a new connection.
func (g *gate) admit(c *gateConn) {
	g.mu.Lock()
	var closeNow bool
	var reclaimed net.Conn
	u := g.user(c.key)
	switch {
	case g.err != nil:
		closeNow = true
	case g.canServe(c.key):
		g.serve(c)
	case c.key == 0 && len(u.queue) < 16*g.lim.RootConns,
		c.key != 0 && len(u.queue) < g.lim.UserConns && g.parked < g.lim.SharedConns:
		wait := g.lim.ConnWait
		if c.key == 0 {
			wait = g.lim.RootConnWait
		} else {
			g.parked++
		}
		c.state = connParked
		u.queue = append(u.queue, c)
		if len(u.queue) == 1 {
			g.turn = append(g.turn, c.key)
		}
		c.timer = time.AfterFunc(time.Duration(wait), func() { g.expire(c, wait) })
		if c.key != 0 && u.served < g.lim.UserConns {
			reclaimed = g.reclaimLocked(u)
		}
	default:
		closeNow = !g.refuseLocked(c, g.capMessage(c.key, "and as many waiting"))
	}
	g.mu.Unlock()
	if closeNow {
		c.Close()
	}
	if reclaimed != nil {
		// The server's read of it fails, and its Close gives the slot
		// back to the connections waiting, u's among them.
		reclaimed.Close()
	}
}

// reclaimLocked picks, for a connection of u parked because all non-root
// uids together hold SharedConns, the longest idle keep-alive connection
// of the uid holding the most, when that uid holds at least two more than
// u: the shared slots then go round, however many uids hold their cap
// (a keep-alive connection may be closed between requests; a client
// opens another). It returns the connection to close, after g.mu is
// released, or nil when there is none to take. g.mu is held.
func (g *gate) reclaimLocked(u *connUser) net.Conn {
	var from *connUser
	for key, v := range g.users {
		if key == 0 || v == u || len(v.idle) == 0 || v.served < u.served+2 {
			continue
		}
		if from == nil || v.served > from.served {
			from = v
		}
	}
	if from == nil {
		return nil
	}
	c := from.idle[0]
	from.idle = from.idle[1:]
	c.idle, c.reclaimed = false, true
	return c.Conn
}

// connState follows a served connection between requests (idle) and in
// one (active), for reclaim.
func (g *gate) connState(c *gateConn, idle bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.state != connServed || c.reclaimed || c.idle == idle {
		return
	}
	c.idle = idle
	u := g.user(c.key)
	if idle {
		u.idle = append(u.idle, c)
	} else {
		u.idle = slices.DeleteFunc(u.idle, func(x *gateConn) bool { return x == c })
	}
}

// capMessage says which cap a connection of key is over.
func (g *gate) capMessage(key uint32, extra string) string {
	u := g.user(key)
	if key == 0 {
		return fmt.Sprintf("root has %d connections open (cap %d) %s", u.served, g.lim.RootConns, extra)
	}
	if u.served < g.lim.UserConns {
		return fmt.Sprintf("all users together have %d connections open (cap %d) %s", g.shared, g.lim.SharedConns, extra)
	}
	return fmt.Sprintf("uid %d has %d connections open (cap %d) %s", key, u.served, g.lim.UserConns, extra)
}

// serve hands c to the server to be served. g.mu is held.
func (g *gate) serve(c *gateConn) {
	g.user(c.key).served++
	if c.key != 0 {
		g.shared++
	}
	c.state = connServed
	g.ready = append(g.ready, c)
	g.signal()
}

// refuseLocked hands c to the server to be answered 503 with why, and
// reports whether there was room to; when there was not, the caller
// closes c unanswered. g.mu is held.
func (g *gate) refuseLocked(c *gateConn, why string) bool {
	u := g.user(c.key)
	limit := g.lim.UserConns
	if c.key == 0 {
		limit = g.lim.RootConns
	}
	if u.refusing >= limit || g.refusing >= g.lim.SharedConns+g.lim.RootConns {
		c.state = connClosed
		g.forget(c.key)
		return false
	}
	u.refusing++
	g.refusing++
	c.state, c.refuse = connRefused, "too many connections: "+why
	g.ready = append(g.ready, c)
	g.signal()
	return true
}

// expire refuses c if it is still parked after waiting.
func (g *gate) expire(c *gateConn, waited Duration) {
	g.mu.Lock()
	if c.state != connParked {
		g.mu.Unlock()
		return
	}
	g.unpark(c)
	ok := g.refuseLocked(c, g.capMessage(c.key, fmt.Sprintf("after a wait of %v", waited)))
	g.mu.Unlock()
	if !ok {
		c.Close()
	}
}

// unpark takes a parked c off its queue. g.mu is held.
func (g *gate) unpark(c *gateConn) {
	u := g.user(c.key)
	u.queue = slices.DeleteFunc(u.queue, func(x *gateConn) bool { return x == c })
	if len(u.queue) == 0 {
		g.turn = slices.DeleteFunc(g.turn, func(k uint32) bool { return k == c.key })
	}
	if c.key != 0 {
		g.parked--
	}
	c.timer.Stop()
	c.state = connNew
}

// dispatch serves parked connections while there are slots, one uid at a
// time in turn. g.mu is held.
func (g *gate) dispatch() {
	if g.err != nil {
		return // Close closes the parked connections
	}
	for progress := true; progress; {
		progress = false
		for _, key := range slices.Clone(g.turn) {
			if !g.canServe(key) {
				continue
			}
			c := g.users[key].queue[0]
			g.unpark(c)
			g.serve(c)
			// The uid goes to the back of the line.
			if len(g.users[key].queue) > 0 {
				g.turn = append(slices.DeleteFunc(g.turn, func(k uint32) bool { return k == key }), key)
			}
			progress = true
		}
	}
}

// Close closes the connection and gives its slot to the next one waiting.
func (c *gateConn) Close() error {
	err := c.Conn.Close()
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.user(c.key)
	switch c.state {
	case connParked:
		g.unpark(c)
	case connServed:
		if c.idle {
			u.idle = slices.DeleteFunc(u.idle, func(x *gateConn) bool { return x == c })
			c.idle = false
		}
		u.served--
		if c.key != 0 {
			g.shared--
		}
	case connRefused:
		u.refusing--
		g.refusing--
	}
	c.state = connClosed
	g.dispatch()
	g.forget(c.key)
	return err
}
