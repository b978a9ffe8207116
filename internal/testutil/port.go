package testutil

import (
	"net"
	"sync"
	"testing"
)

var (
	portsMu sync.Mutex
	// portsGiven are the ports handed out in this test binary, never handed out twice.
	portsGiven = map[int]bool{}
)

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on when asked and that no other
// caller in this test binary has been given.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct ports as FreePort does.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var (
		ports []int
		lns   []net.Listener
	)
	// The listeners stay open until all n are chosen, so that the kernel does not hand one out twice.
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		lns = append(lns, ln)
		p := ln.Addr().(*net.TCPAddr).Port
		if portsGiven[p] {
			continue
		}
		portsGiven[p] = true
		ports = append(ports, p)
	}
	return ports
}
