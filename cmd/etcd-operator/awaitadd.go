package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// awaitAddOptions are await-add's flags.
type awaitAddOptions struct {
	peerURL  string
	peers    []string
	tlsDir   string
	interval time.Duration
	progress time.Duration
}

func newAwaitAddCommand() *cobra.Command {
	o := &awaitAddOptions{}
	cmd := &cobra.Command{
		Use:   "await-add",
		Short: "Wait until etcd lists this member, before its etcd starts (runs as an init container)",
		Long: `Asks the members at --peers for etcd's member list (GET <peer URL>/members, what a joining etcd
asks itself) until a member with --peer-url is listed, then exits 0 so that etcd starts and joins.

The operator creates a joining member's pod before it adds the member to etcd: the volume is provisioned
and the pod gets its address, and with it its DNS name, while nothing runs yet. When the member is then
added, the leader resolves a name that exists; added first, the leader would look the name up before
its pod had an address, and the DNS server would keep answering "no such host" for its negative-cache
time (seconds to tens of seconds), during which the new member cannot catch up. It waits without a
deadline: the operator deletes the pod when the member is no longer wanted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAwaitAdd(cmd.Context(), cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.peerURL, "peer-url", "", "this member's peer URL, as it will be added to etcd")
	f.StringSliceVar(&o.peers, "peers", nil, "peer URLs of the members to ask, comma separated")
	f.StringVar(&o.tlsDir, "peer-tls-dir", "", "directory of the peer certificate (tls.crt, tls.key) and trusted CAs (ca.crt) for https:// peer URLs")
	f.DurationVar(&o.interval, "interval", 200*time.Millisecond, "how often the members are asked")
	f.DurationVar(&o.progress, "progress-interval", 10*time.Second, "how often the wait is reported while it lasts")
	return cmd
}

// peerMember is a member as etcd's peer endpoint /members lists it.
type peerMember struct {
	ID       uint64   `json:"id"`
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

func runAwaitAdd(ctx context.Context, cmd *cobra.Command, o *awaitAddOptions) error {
	if o.peerURL == "" || len(o.peers) == 0 {
		return errors.New("--peer-url and --peers are required")
	}
	pc := &peerClient{dir: o.tlsDir}
	if ctx == nil {
		ctx = context.Background()
	}
	start, lastReport := time.Now(), time.Now()
	for {
		hc, err := pc.get()
		if err != nil {
			return err
		}
		id, why := listed(ctx, hc, o.peers, o.peerURL)
		if id != 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "etcd lists member %x at %s (after %s): starting etcd\n", id, o.peerURL, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(lastReport) >= o.progress {
			fmt.Fprintf(cmd.OutOrStdout(), "waiting %s for the operator to add %s to etcd; next: etcd starts and joins as a learner (%s)\n",
				time.Since(start).Round(time.Second), o.peerURL, why)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.interval):
		}
	}
}

// listed asks each peer in turn for the member list and returns the ID of the member with peerURL, or 0
// and what the peers answered.
func listed(ctx context.Context, hc *http.Client, peers []string, peerURL string) (uint64, string) {
	var answers []string
	for _, p := range peers {
		members, err := peerMembers(ctx, hc, p)
		if err != nil {
			answers = append(answers, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		for _, m := range members {
			if slices.Contains(m.PeerURLs, peerURL) {
				return m.ID, ""
			}
		}
		answers = append(answers, fmt.Sprintf("%s lists %d members, not this one", p, len(members)))
	}
	return 0, strings.Join(answers, "; ")
}

// peerMembers returns the member list that the member at peer URL p serves.
func peerMembers(ctx context.Context, hc *http.Client, p string) ([]peerMember, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(p, "/")+"/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var members []peerMember
	if err := json.NewDecoder(resp.Body).Decode(&members); err != nil {
		return nil, fmt.Errorf("decode the member list: %w", err)
	}
	return members, nil
}

// peerClient holds the client of the peer endpoints and the TLS files it was made from, so that a
// pod that waits long (behind a member that is down, or a quota) follows a renewed certificate or a CA
// rotation's trust bundle instead of being refused by its peers with what it read at its start.
type peerClient struct {
	dir   string
	files [3]string
	hc    *http.Client
}

// get returns the client, made anew when the files in dir changed since the last call (the Secret's
// volume is updated in place); it returns an error when they cannot be read or parsed.
func (p *peerClient) get() (*http.Client, error) {
	var files [3]string
	if p.dir != "" {
		for i, name := range []string{resources.TLSCertKey, resources.TLSKeyKey, resources.CAKey} {
			b, err := os.ReadFile(filepath.Join(p.dir, name))
			if err != nil {
				return nil, fmt.Errorf("peer TLS files: %w", err)
			}
			files[i] = string(b)
		}
	}
	if p.hc != nil && files == p.files {
		return p.hc, nil
	}
	hc, err := peerHTTPClient([]byte(files[0]), []byte(files[1]), []byte(files[2]))
	if err != nil {
		return nil, err
	}
	if p.hc != nil {
		p.hc.CloseIdleConnections()
	}
	p.hc, p.files = hc, files
	return hc, nil
}

// peerHTTPClient returns the client of the peer endpoints: with the peer certificate (certPEM, keyPEM)
// and trusted CAs (caPEM) when they are set (peers check the certificate, and etcd's peer certificates
// name the members). Its connections are kept between asks: a TLS handshake per ask every 200 ms would
// cost the members more than the answer.
func peerHTTPClient(certPEM, keyPEM, caPEM []byte) (*http.Client, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second}
	if len(certPEM) > 0 {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("peer certificate: %w", err)
		}
		roots, err := pki.Pool(caPEM)
		if err != nil {
			return nil, fmt.Errorf("peer CAs: %w", err)
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, RootCAs: roots}
	}
	return &http.Client{Transport: tr}, nil
}
