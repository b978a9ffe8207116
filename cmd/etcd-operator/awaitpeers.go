package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcd-operator/internal/resources"
)

// awaitPeersOptions are await-peers' flags.
type awaitPeersOptions struct {
	file       string
	annotation string
	interval   time.Duration
	progress   time.Duration
	maxWait    time.Duration
	listen     string
}

func newAwaitPeersCommand() *cobra.Command {
	o := &awaitPeersOptions{}
	cmd := &cobra.Command{
		Use:   "await-peers",
		Short: "Wait until every initial member's pod has its address, before etcd first starts (runs as an init container)",
		Long: `Waits until the operator says that every initial member's pod has its address, then exits 0 so
that etcd starts. The operator says so twice: with a POST to ` + resources.PeersAddressedPath + ` on --listen
(the peer port, free until etcd starts; answered at once), and by setting --annotation to "true" on the
pod, which is read from --annotations-file (a downward API volume, which the kubelet updates about a
second or two after the change).

The operator creates the pods of a new cluster's initial members together and sets the annotation on
each once all of them have their addresses, and with them their DNS names. An etcd that started before
would look its peers' names up at once, and a name looked up before its pod has an address is answered
"no such host" by the cluster's DNS server from its negative cache for a while (5 s with CoreDNS's
kubernetes plugin): the members could not reach each other, and the cluster would form only then.

After --max-wait it exits 0 anyway, so that an operator that is down or older only costs that time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAwaitPeers(cmd.Context(), cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.file, "annotations-file", "", "the pod's annotations, as a downward API volume writes them (key=\"value\" lines)")
	f.StringVar(&o.annotation, "annotation", "", "the annotation whose value \"true\" ends the wait")
	f.DurationVar(&o.interval, "interval", 100*time.Millisecond, "how often the file is read")
	f.DurationVar(&o.progress, "progress-interval", 5*time.Second, "how often the wait is reported while it lasts")
	f.DurationVar(&o.maxWait, "max-wait", 30*time.Second, "how long to wait at most before etcd starts anyway")
	f.StringVar(&o.listen, "listen", "", "address to take the operator's word on (plain HTTP), such as :2380; empty: none")
	return cmd
}

func runAwaitPeers(ctx context.Context, cmd *cobra.Command, o *awaitPeersOptions) error {
	if o.file == "" || o.annotation == "" {
		return errors.New("--annotations-file and --annotation are required")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	told, stop, err := listenForWord(o.listen)
	if err != nil {
		return err
	}
	defer stop()
	start, lastReport := time.Now(), time.Now()
	for {
		value, err := annotationValue(o.file, o.annotation)
		if err == nil && value == "true" {
			fmt.Fprintf(cmd.OutOrStdout(), "every initial member's pod has its address (the pod's annotation, after %s): starting etcd\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		why := fmt.Sprintf("annotation %s is %q", o.annotation, value)
		if err != nil {
			why = err.Error()
		}
		if time.Since(start) >= o.maxWait {
			fmt.Fprintf(cmd.OutOrStdout(), "no word from the operator after %s (%s): starting etcd anyway; its peers' names may be answered \"no such host\" for a while\n",
				time.Since(start).Round(time.Second), why)
			return nil
		}
		if time.Since(lastReport) >= o.progress {
			fmt.Fprintf(cmd.OutOrStdout(), "waiting %s for the operator to see every initial member's pod with its address (%s); next: etcd starts\n",
				time.Since(start).Round(time.Second), why)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-told:
			fmt.Fprintf(cmd.OutOrStdout(), "every initial member's pod has its address (the operator's POST, after %s): starting etcd\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		case <-time.After(o.interval):
		}
	}
}

// listenForWord serves POST resources.PeersAddressedPath on addr (plain HTTP) and returns a channel
// closed at the first one, and a function that stops the server, once it has answered the calls it took
// (for at most a second), and frees addr (for etcd). With addr
// empty the channel is never closed.
func listenForWord(addr string) (<-chan struct{}, func(), error) {
	told := make(chan struct{})
	if addr == "" {
		return told, func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s for the operator's word: %w", addr, err)
	}
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+resources.PeersAddressedPath, func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(told) })
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 2 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	// Shutdown, not Close: the handler closes told before its answer is written, and the caller stops
	// the server as soon as it sees told; Close would cut the operator's call off unanswered
	return told, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// annotationValue returns the value of annotation key in file, as the kubelet writes a downward API
// volume's metadata.annotations: one key="value" line per annotation, the value quoted as Go quotes
// strings. It returns "" and no error when the annotation is not there, and an error when the file
// cannot be read or a line of it parsed.
func annotationValue(file, key string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the pod's annotations: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		k, quoted, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if !ok || k != key {
			continue
		}
		v, err := strconv.Unquote(quoted)
		if err != nil {
			return "", fmt.Errorf("the pod's annotation %s: %w", key, err)
		}
		return v, nil
	}
	return "", nil
}
