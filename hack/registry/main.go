// Command registry serves an OCI distribution (Docker v2) registry over plain HTTP, its images held in
// memory and lost when it stops: go-containerregistry's pkg/registry. The end-to-end test of the
// release path (TestReleaseFromRegistry) runs it in the local cluster, pushes the operator image to it
// with `make push`, and installs the operator from it.
//
// Usage:
//
//	registry [-addr 127.0.0.1:5000]
//
// It logs one line per request on standard error (method, path, status) and stops on SIGTERM or
// SIGINT. Memory grows with what is pushed: about the size of the images.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "address to listen on, host:port")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serve(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

// serve serves the registry on addr until ctx is done.
func serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose a free address with -addr)", addr, err)
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	srv := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	logger.Printf("serving an in-memory OCI registry on http://%s", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
