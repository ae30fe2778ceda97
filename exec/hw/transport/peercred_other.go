//go:build !linux

package transport

import (
	"errors"
	"net"
)

// peerCred is Linux's SO_PEERCRED; elsewhere the proxy refuses every
// client rather than serve one it cannot identify.
func peerCred(*net.UnixConn) (uid uint32, pid int32, err error) {
	return 0, 0, errors.New("peer credentials: not supported on this system")
}
