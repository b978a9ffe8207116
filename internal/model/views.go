package model

// The views of a cluster for the planners of packages membership and rollout.

import (
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/rollout"
)

// Membership is the membership planner's view of the cluster: etcd's members (a member that serves,
// NOSPACE alarm included, counts as healthy: the alarm must not block membership changes) and the pods
// and claims of every member name that has one; the members named in replace are marked for
// replacement, for the reason it gives. Only meaningful when etcd answered.
func (c *Cluster) Membership(replace map[string]string) membership.State {
	st := membership.State{Cluster: c.Object.Name, Replicas: c.Desired, Resources: map[string]membership.Resources{}}
	if c.Etcd != nil {
		st.Leader = c.Etcd.Leader
	}
	for _, m := range c.Listed() {
		st.Members = append(st.Members, membership.Member{
			// a member whose data diverged from the majority's serves wrong data: not a healthy one
			ID: m.ID(), Name: m.Name, IsLearner: m.Learner(), Started: m.Started(), Healthy: m.Serving() && m.DataDiverged() == "",
			Joining: m.Joining(c.Now), InRaft: m.InRaft(c.Now), Replace: replace[m.Name],
		})
	}
	listed := map[string]bool{}
	for _, m := range c.Listed() {
		listed[m.Name] = true
	}
	st.AwaitAdd = c.Options.AwaitAdd && c.Options.OperatorImage != ""
	for _, m := range c.Members {
		if m.Pod != nil || m.Claim != nil {
			// a member to be added whose pod waits, or whose claim is made and its pod not yet seen
			awaiting := !listed[m.Name] && (m.HasPod() && m.AwaitsAdd() && !m.AwaitingClaimLost(c.Now) ||
				!m.HasPod() && !m.PodTerminating() && m.AwaitingClaim())
			var problem string
			if awaiting {
				problem = m.PodProblem()
			}
			st.Resources[m.Name] = membership.Resources{Pod: m.HasPod(), PodTerminating: m.PodTerminating(),
				Data: m.HasClaim(), DataTerminating: m.ClaimTerminating(),
				PodStuck: m.PodStuck(c.Now), Awaiting: awaiting, Addressed: awaiting && m.AwaitAddRunning(), Problem: problem}
		}
	}
	return st
}

// Rollout is the rollout planner's view of the cluster; hash is the pod hash of the current spec (see
// resources.Options.SpecHash): a member is up to date when its pod carries it and serves TLS as
// DesiredTLS says (PodCurrent).
func (c *Cluster) Rollout(hash string) rollout.State {
	st := rollout.State{}
	if c.Etcd != nil {
		st.Leader = c.Etcd.Leader
	}
	for _, m := range c.Listed() {
		st.Members = append(st.Members, rollout.Member{
			Name: m.Name, ID: m.ID(), Learner: m.Learner(), Healthy: m.Serving(), Ready: m.PodReady(),
			// a member without a pod has nothing to restart: its pod is created with the current spec
			UpToDate: m.Pod == nil || c.PodCurrent(m, hash),
			Going:    m.PodTerminating(), Starting: m.Starting(c.Now), NewPod: m.NewPod(c.Now), Problem: m.Problem(),
		})
	}
	return st
}

// PeerSwitch is the view of a switch of the peer port for the rollout planner: a member is up to date
// when its peer URL in etcd's member list has the scheme the spec asks for (or is not one the operator
// gives, RecordedPeerHTTPS). The planner's step to
// restart a member becomes, for the switch, the update of its peer URL (see DesiredTLS).
func (c *Cluster) PeerSwitch() rollout.State {
	st := rollout.State{}
	if c.Etcd != nil {
		st.Leader = c.Etcd.Leader
	}
	for _, m := range c.Listed() {
		https, known := c.RecordedPeerHTTPS(m.Name)
		st.Members = append(st.Members, rollout.Member{
			Name: m.Name, ID: m.ID(), Learner: m.Learner(), Healthy: m.Serving(), Ready: m.PodReady(),
			UpToDate: !known || https == c.Object.Spec.PeerTLS(),
		})
	}
	return st
}

// PodIPs returns the IP of each member pod that has one, by member name.
func (c *Cluster) PodIPs() map[string]string {
	ips := map[string]string{}
	for _, m := range c.Pods() {
		if m.Pod.Status.PodIP != "" {
			ips[m.Name] = m.Pod.Status.PodIP
		}
	}
	return ips
}
