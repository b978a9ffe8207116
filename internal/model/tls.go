package model

import (
	"time"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// The states of a switch of spec.tls for a running cluster, as DesiredTLS gives them, member by member
// so that no member loses its peers and no client request fails beyond a retry:
//
//   - Client port: every member serves both http:// and https:// (etcd serves both schemes on one port
//     when --listen-client-urls names both), then, once every member has for the grace period
//     (resources.Options.TLSSwitchGrace, for clients to move), only the scheme the spec asks for.
//   - Peer port, switched on: every member first carries the peer certificate while its peer port still
//     serves plain text, so that it can dial peers that serve TLS; then, one member at a time, its peer
//     URL in etcd's member list becomes https:// and its pod is restarted to serve TLS on it.
//   - Peer port, switched off: the same the other way round, and the members drop the peer certificate
//     once no peer URL is https:// any more.
//
// A member's peer port always serves the scheme of its peer URL in etcd's member list, the URL its
// peers dial, so that a pod recreated at any point of a switch reaches its peers.

// RecordedPeerHTTPS reports whether member name's peer URL is https://, as etcd lists it or, when etcd
// did not answer, as the status last recorded it; ok is false when neither knows the member, or the URL
// is not one the operator gives (resources.Options.PeerURLScheme): its scheme is not the operator's to
// switch.
func (c *Cluster) RecordedPeerHTTPS(name string) (https, ok bool) {
	var u string
	if m := c.Member(name); m != nil && m.Etcd != nil && len(m.Etcd.PeerURLs) > 0 {
		u = m.Etcd.PeerURLs[0]
	} else if c.Etcd == nil {
		for _, ms := range c.Object.Status.Members {
			if ms.Name == name {
				u = ms.PeerURL
			}
		}
	}
	switch u {
	case c.Options.PeerURLScheme(c.Object, name, true):
		return true, true
	case c.Options.PeerURLScheme(c.Object, name, false):
		return false, true
	}
	return false, false
}

// recordedPeers returns how many members have a known peer URL, and how many of those are https://.
func (c *Cluster) recordedPeers() (known, https int) {
	names := map[string]bool{}
	for _, m := range c.Members {
		names[m.Name] = true
	}
	for _, ms := range c.Object.Status.Members {
		names[ms.Name] = true
	}
	for name := range names {
		if h, ok := c.RecordedPeerHTTPS(name); ok {
			known++
			if h {
				https++
			}
		}
	}
	return known, https
}

// NewMemberPeerHTTPS reports whether a member added now gets an https:// peer URL: when the spec asks
// for peer TLS and every member's peer URL already is https:// (a member added during a switch joins
// with plain text, which every member can dial, and is switched with the others).
func (c *Cluster) NewMemberPeerHTTPS() bool {
	known, https := c.recordedPeers()
	return c.Object.Spec.PeerTLS() && known == https
}

// DesiredTLS returns how member name's pod is to serve TLS now (see the states above): the client port
// as ClientTLS says, the peer certificate while the spec asks for peer TLS or any peer URL is still
// https://, and the peer port in the scheme of the member's peer URL (NewMemberPeerHTTPS for a member
// etcd does not list).
func (c *Cluster) DesiredTLS(name string) resources.PodTLS {
	t := resources.SpecTLS(c.Object)
	t.ClientHTTP, t.ClientHTTPS, _ = c.ClientTLS()
	_, https := c.recordedPeers()
	t.PeerCertificates = t.PeerCertificates || https > 0
	var ok bool
	if t.PeerHTTPS, ok = c.RecordedPeerHTTPS(name); !ok {
		t.PeerHTTPS = c.NewMemberPeerHTTPS()
	}
	return t
}

// DefaultTLSSwitchGrace is the grace period of a client port switch when the options give none.
const DefaultTLSSwitchGrace = 2 * time.Minute

// ClientScheme returns the scheme spec.tls.client asks for: "https" or "http".
func (c *Cluster) ClientScheme() etcdv1beta1.URLScheme {
	if c.Object.Spec.ClientTLS() {
		return etcdv1beta1.SchemeHTTPS
	}
	return etcdv1beta1.SchemeHTTP
}

// ClientSchemeChangedAt returns when the operator saw spec.tls.client.enabled change to what it asks
// now, from status.tls (ClientScheme, ClientSchemeChangedAt): this pass's time when the status records
// the other scheme, the recorded time when it records this one. When it records none (TLS was off on
// both ports, or an operator version before these fields wrote the status), this pass's time while a
// member pod serves another client scheme than the spec's alone (a switch is under way: at most one
// grace period too many), the zero time otherwise.
func (c *Cluster) ClientSchemeChangedAt() time.Time {
	st := c.Object.Status.TLS
	switch {
	case st == nil || st.ClientScheme == "":
		target := c.Object.Spec.ClientTLS()
		for _, m := range c.Pods() {
			if !m.HasPod() {
				continue
			}
			if !servesOnly(resources.PodTLSOf(m.Pod), target) {
				return c.Now
			}
		}
		return time.Time{}
	case st.ClientScheme != c.ClientScheme():
		return c.Now
	case st.ClientSchemeChangedAt != nil:
		return st.ClientSchemeChangedAt.Time
	}
	return time.Time{}
}

// servesOnly reports whether a pod serving as t serves its client port in one scheme only: https://
// when https, http:// otherwise.
func servesOnly(t resources.PodTLS, https bool) bool {
	return t.ClientHTTPS == https && t.ClientHTTP == !https
}

// TLSSwitchGrace returns the grace period of a client port switch: resources.Options.TLSSwitchGrace,
// or DefaultTLSSwitchGrace when the options give none.
func (c *Cluster) TLSSwitchGrace() time.Duration {
	if c.Options.TLSSwitchGrace == 0 {
		return DefaultTLSSwitchGrace
	}
	return c.Options.TLSSwitchGrace
}

// ClientTLS returns the schemes the members' client port is to serve now: both while any member pod
// still serves only the scheme the spec no longer asks for, and while every member serves both but
// for less than the grace period (then graceEnds says until when); the spec's scheme otherwise, also
// once any member serves only it (the switch's last stage is under way). The grace period counts from
// the later of the newest pod that serves both and when the spec last changed (ClientSchemeChangedAt),
// so that a switch changed back during its last stage gives clients the whole grace period to move
// back, also while the member that served only the new scheme is being recreated, and so that the
// only member of a 1-member cluster serves both before only the new scheme. A member whose pod is
// being recreated is not counted otherwise: once the grace period is over it is recreated serving the
// spec's scheme only.
func (c *Cluster) ClientTLS() (http, https bool, graceEnds time.Time) {
	target := c.Object.Spec.ClientTLS()
	var old, both, done int
	start := c.ClientSchemeChangedAt()
	for _, m := range c.Pods() {
		if !m.HasPod() {
			continue
		}
		switch t := resources.PodTLSOf(m.Pod); {
		case t.ClientHTTP && t.ClientHTTPS:
			both++
			if created := m.Pod.CreationTimestamp.Time; created.After(start) {
				start = created
			}
		case servesOnly(t, target):
			done++
		default:
			old++
		}
	}
	grace := c.TLSSwitchGrace()
	switch {
	case old > 0:
		return true, true, time.Time{}
	case done == 0 && (both > 0 || !start.IsZero()) && c.Now.Before(start.Add(grace)):
		// also with no pod at all within the grace period of a change: the member of a 1-member
		// cluster, recreated, serves both schemes first
		return true, true, start.Add(grace)
	}
	return !target, target, time.Time{}
}

// PodCurrent reports whether member m's pod was built from the current spec (its spec hash annotation
// is hash, resources.Options.SpecHash) and serves TLS as DesiredTLS says.
func (c *Cluster) PodCurrent(m *Member, hash string) bool {
	return m.Pod != nil && m.PodSpecHash() == hash &&
		resources.PodTLSOf(m.Pod) == c.DesiredTLS(m.Name)
}
