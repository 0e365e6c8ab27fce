//go:build !linux

package api

import (
	"context"
	"errors"
	"net"
)

// peerCred is Linux-only for now (macOS has LOCAL_PEERCRED; not wired).
func peerCred(c net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials are not supported on this system")
}

// peerOf is peerCred on systems without peer credentials.
func peerOf(c net.Conn) (Peer, error) { return peerCred(c) }

// peerRead is a peer read in two steps (peer_linux.go); here the first
// step reads all there is.
type peerRead struct{ p Peer }

func startPeer(c net.Conn) (peerRead, error) {
	p, err := peerCred(c)
	return peerRead{p}, err
}

func (r peerRead) share() uint32          { return r.p.Share() }
func (r peerRead) drop()                  {}
func (r peerRead) finish(c net.Conn) Peer { return r.p }

// ownPidNS is 0: no pid namespaces here.
func ownPidNS() uint64 { return 0 }

// ErrNoPeerPidfd: no pidfds here.
var ErrNoPeerPidfd = errors.New("no pidfd of the peer")

// confinable: none of Linux's confinements here.
func confinable(ctx context.Context, p Peer) bool { return false }

// PeerPidfd fails with ErrNoPeerPidfd: no pidfds here.
func PeerPidfd(ctx context.Context) (int, error) { return -1, ErrNoPeerPidfd }
