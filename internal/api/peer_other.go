//go:build !linux

package api

import (
	"errors"
	"net"
)

// peerCred is Linux-only for now (macOS has LOCAL_PEERCRED; not wired).
func peerCred(c net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials are not supported on this system")
}
