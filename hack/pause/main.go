// Command pause is the pod sandbox process of the local cluster (image registry.k8s.io/pause:3.10,
// packed by hack/build-images.sh). It sleeps until SIGTERM or SIGINT and exits 0; as PID 1 of the
// sandbox it also reaps zombies on SIGCHLD, like the upstream C pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
