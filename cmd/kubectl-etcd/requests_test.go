package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// healthyStatus is the status of a healthy 3-member cluster demo led by demo-0, whose members'
// database files are 8, 6 and 4 MiB.
func healthyStatus() etcdv1beta1.EtcdClusterStatus {
	return etcdv1beta1.EtcdClusterStatus{
		Phase: etcdv1beta1.PhaseRunning, ReadyReplicas: 3, Replicas: 3, Leader: "demo-0",
		Conditions: []metav1.Condition{
			{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: etcdv1beta1.ReasonQuorumHealthy, LastTransitionTime: metav1.Now()},
			{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1beta1.ReasonReconciled, LastTransitionTime: metav1.Now()},
		},
		Members: []etcdv1beta1.MemberStatus{
			{Name: "demo-0", ID: "2c1c5e7f0b3a9d11", Role: etcdv1beta1.RoleVoter, Healthy: true, Leader: true, DBSizeBytes: 8 << 20},
			{Name: "demo-1", ID: "91bc3c398fb3c146", Role: etcdv1beta1.RoleVoter, Healthy: true, DBSizeBytes: 6 << 20},
			{Name: "demo-2", ID: "fd422379fda50e48", Role: etcdv1beta1.RoleVoter, Healthy: true, DBSizeBytes: 4 << 20},
		},
	}
}

// awaitRequest waits until cluster c has annotation key and returns its value.
func awaitRequest(t *testing.T, c *etcdv1beta1.EtcdCluster, key string) string {
	t.Helper()
	var v string
	testutil.Eventually(t, 10*time.Second, key+" set", func(ctx context.Context) error {
		got := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		var ok bool
		if v, ok = got.Annotations[key]; !ok {
			return fmt.Errorf("annotations %v", got.Annotations)
		}
		return nil
	})
	return v
}

// answer plays the operator answering a request: it writes the status mutate makes, records an event
// of reason with note, and removes annotation key.
func answer(t *testing.T, c *etcdv1beta1.EtcdCluster, key, reason, note string, mutate func(*etcdv1beta1.EtcdClusterStatus)) {
	t.Helper()
	ctx := context.Background()
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&got.Status)
		if err := k8s.Status().Update(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	typ := corev1.EventTypeNormal
	if reason == etcdv1beta1.ReasonRequestRefused {
		typ = corev1.EventTypeWarning
	}
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: c.Name + "-", Namespace: c.Namespace},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "etcd-operator", ReportingInstance: "etcd-operator-test",
		Action: "Test", Reason: reason, Type: typ, Note: note,
		Regarding: corev1.ObjectReference{Kind: "EtcdCluster", APIVersion: etcdv1beta1.GroupVersion.String(), Namespace: c.Namespace, Name: c.Name, UID: got.UID},
	}
	if err := k8s.Create(ctx, e); err != nil {
		t.Fatalf("create event: %v", err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, key)
	if err := k8s.Patch(ctx, got, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// waitOutput waits until out shows want.
func waitOutput(t *testing.T, out *testutil.SyncBuffer, want string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "output shows "+want, func(context.Context) error {
		if !strings.Contains(out.String(), want) {
			return fmt.Errorf("output so far: %q", out)
		}
		return nil
	})
}

// TestMoveLeader: move-leader sets etcd.etcdkit.dev/move-leader and, once the operator removed it,
// prints the new leader from the status; a refusal fails with the operator's reason; a request of
// another value still pending is not overwritten; without an operator the request stays and the
// command says so after its --timeout.
func TestMoveLeader(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "move-leader")
	c := createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3)), healthyStatus())
	key := etcdv1beta1.AnnotationMoveLeader

	out, done := start("-n", ns, "move-leader", "demo", "demo-1", "--timeout", "30s")
	if v := awaitRequest(t, c, key); v != "demo-1" {
		t.Fatalf("%s=%s, want demo-1", key, v)
	}
	waitOutput(t, out, "EtcdCluster move-leader/demo: asked the operator with etcd.etcdkit.dev/move-leader=demo-1\n")
	answer(t, c, key, "MovedLeader", "Moved leadership from demo-0 to demo-1 (ID 91bc3c398fb3c146): as etcd.etcdkit.dev/move-leader asked",
		func(st *etcdv1beta1.EtcdClusterStatus) { st.Leader = "demo-1" })
	r := <-done
	if r.err != nil || !strings.HasSuffix(r.out.String(), "\ndemo-1 leads EtcdCluster move-leader/demo (ID 91bc3c398fb3c146); demo-0 led before\n") {
		t.Errorf("move-leader: %v\n%s", r.err, r.out)
	}

	_, done = start("-n", ns, "move-leader", "demo", "demo-7", "--timeout", "30s")
	awaitRequest(t, c, key)
	refusal := "Refused etcd.etcdkit.dev/move-leader=demo-7: the cluster has no member demo-7 (its members: demo-0, demo-1, demo-2)"
	answer(t, c, key, etcdv1beta1.ReasonRequestRefused, refusal, nil)
	if r = <-done; r.err == nil || r.err.Error() != "the operator refused the request: "+refusal {
		t.Errorf("refused move-leader: %v", r.err)
	}

	// withdrawn: the annotation goes without an answer from the operator
	_, done = start("-n", ns, "move-leader", "demo", "demo-2", "--timeout", "30s")
	awaitRequest(t, c, key)
	withdraw := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, key)
	if err := k8s.Patch(context.Background(), c.DeepCopy(), client.RawPatch(types.MergePatchType, withdraw)); err != nil {
		t.Fatal(err)
	}
	if r = <-done; r.err == nil || r.err.Error() != "the request etcd.etcdkit.dev/move-leader=demo-2 was withdrawn from EtcdCluster move-leader/demo before the operator answered it (someone removed the annotation); the operator did not carry it out" {
		t.Errorf("withdrawn move-leader: %v", r.err)
	}

	r = run("-n", ns, "move-leader", "demo", "demo-2", "--timeout", "1s", "-o", "json")
	if r.err == nil || !strings.Contains(r.err.Error(), "the operator had not carried out etcd.etcdkit.dev/move-leader=demo-2 on EtcdCluster move-leader/demo within 1s; the request stays") ||
		r.out.String() != "" || !strings.Contains(r.errOut.String(), "asked the operator") {
		t.Errorf("move-leader without an operator: %v\nstdout %q\nstderr %q", r.err, r.out, r.errOut)
	}
	r = run("-n", ns, "move-leader", "demo", "demo-0", "--timeout", "1s")
	if r.err == nil || !strings.Contains(r.err.Error(), "already has the request etcd.etcdkit.dev/move-leader=demo-2") {
		t.Errorf("move-leader over a pending request: %v", r.err)
	}
	if v := awaitRequest(t, c, key); v != "demo-2" {
		t.Errorf("the pending request became %s=%s", key, v)
	}
}

// TestDefrag: defrag sets etcd.etcdkit.dev/defragment to the time, follows the Progressing condition,
// and once the operator reported the request done prints each member's database file size before and
// after, as a table or with -o json.
func TestDefrag(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "defrag")
	c := createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3)), healthyStatus())
	key := etcdv1beta1.AnnotationDefragment
	shrink := func(st *etcdv1beta1.EtcdClusterStatus) {
		for i := range st.Members {
			st.Members[i].DBSizeBytes = 1 << 20
		}
		st.Maintenance = &etcdv1beta1.MaintenanceStatus{LastDefragmentation: &etcdv1beta1.DefragmentationRecord{
			Member: "demo-0", Time: metav1.Now(), DurationMillis: 40, DBSizeBeforeBytes: 8 << 20, DBSizeAfterBytes: 1 << 20}}
	}

	out, done := start("-n", ns, "defrag", "demo", "--timeout", "30s")
	token := awaitRequest(t, c, key)
	if _, err := time.Parse(time.RFC3339, token); err != nil {
		t.Errorf("%s=%s: not an RFC 3339 time", key, token)
	}
	progressing(t, c, etcdv1beta1.ReasonDefragmenting, "Defragmented demo-1 in 12ms: its database file went from 6.0 MiB to 1.0 MiB; next: demo-2, demo-0")
	waitOutput(t, out, "Defragmenting: Defragmented demo-1 in 12ms")
	answer(t, c, key, "Defragmented", "Defragmented every voting member as etcd.etcdkit.dev/defragment="+token+" asked", shrink)
	r := <-done
	want := "Defragmented every voting member of EtcdCluster defrag/demo:\n" +
		"MEMBER   DB SIZE BEFORE   DB SIZE AFTER\n" +
		"demo-0   8 MiB            1 MiB\n" +
		"demo-1   6 MiB            1 MiB\n" +
		"demo-2   4 MiB            1 MiB\n"
	if got := r.out.String(); r.err != nil || !strings.HasSuffix(got, want) {
		t.Errorf("defrag: %v (-want +got):\n%s", r.err, cmp.Diff(want, got[max(0, len(got)-len(want)):]))
	}

	setStatus(t, c, healthyStatus())
	out, done = start("-n", ns, "defrag", "demo", "--timeout", "30s", "-o", "json")
	token = awaitRequest(t, c, key)
	answer(t, c, key, "Defragmented", "Defragmented every voting member as etcd.etcdkit.dev/defragment="+token+" asked", shrink)
	r = <-done
	res := defragResult{}
	if r.err != nil || json.Unmarshal(r.out.Bytes(), &res) != nil {
		t.Fatalf("defrag -o json: %v\n%s", r.err, out)
	}
	if len(res.Members) != 3 || res.Members[0] != (defragMember{Name: "demo-0", DBSizeBeforeBytes: 8 << 20, DBSizeAfterBytes: 1 << 20}) ||
		res.Request != token || res.LastDefragmentation == nil || res.LastDefragmentation.Member != "demo-0" {
		t.Errorf("defrag -o json: %+v", res)
	}
}

// progressing writes the Progressing condition of cluster c as the operator would.
func progressing(t *testing.T, c *etcdv1beta1.EtcdCluster, reason, msg string) {
	t.Helper()
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == etcdv1beta1.ConditionProgressing {
			got.Status.Conditions[i].Status, got.Status.Conditions[i].Reason, got.Status.Conditions[i].Message = metav1.ConditionTrue, reason, msg
		}
	}
	if err := k8s.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}

// setStatus writes st as the status of cluster c.
func setStatus(t *testing.T, c *etcdv1beta1.EtcdCluster, st etcdv1beta1.EtcdClusterStatus) {
	t.Helper()
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	got.Status = st
	if err := k8s.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}

// TestReplaceMember: replace-member refuses to run without --yes when stdin is not a terminal, and
// changes nothing when the person on a terminal does not answer yes; with --yes it sets
// etcd.etcdkit.dev/replace-member and, once the operator removed it, waits until the status lists the
// member under a new ID as a healthy voter of an Available cluster, and prints it.
func TestReplaceMember(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "replace")
	c := createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3)), healthyStatus())
	key := etcdv1beta1.AnnotationReplaceMember

	r := run("-n", ns, "replace-member", "demo", "demo-1")
	if r.err == nil || !strings.Contains(r.err.Error(), "pass --yes to confirm (stdin is not a terminal to ask on)") {
		t.Errorf("replace-member without --yes: %v", r.err)
	}
	defer func(was func(io.Reader) bool) { isTerminal = was }(isTerminal)
	isTerminal = func(io.Reader) bool { return true }
	r = runWithInput("n\n", "-n", ns, "replace-member", "demo", "demo-1")
	if r.err == nil || r.err.Error() != "not confirmed: nothing was changed" || !strings.Contains(r.errOut.String(), "Replace member demo-1 of EtcdCluster demo? ") {
		t.Errorf("replace-member not confirmed: %v\n%s", r.err, r.errOut)
	}
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil || got.Annotations[key] != "" {
		t.Fatalf("annotations after a replacement not confirmed: %v %v", got.Annotations, err)
	}

	out, done := startWithInput("yes\n", "-n", ns, "replace-member", "demo", "demo-1", "--timeout", "30s")
	if v := awaitRequest(t, c, key); v != "demo-1" {
		t.Fatalf("%s=%s, want demo-1", key, v)
	}
	replacing := "Replacing member demo-1 (ID 91bc3c398fb3c146) as etcd.etcdkit.dev/replace-member asked: deleted its claim and pod"
	answer(t, c, key, etcdv1beta1.ReasonReplacingMember, replacing, func(st *etcdv1beta1.EtcdClusterStatus) {
		st.Conditions[1].Status, st.Conditions[1].Reason, st.Conditions[1].Message = metav1.ConditionTrue, etcdv1beta1.ReasonReplacingMember, replacing
		st.Members[1] = etcdv1beta1.MemberStatus{Name: "demo-1", ID: "91bc3c398fb3c146", Role: etcdv1beta1.RoleVoter}
		st.ReadyReplicas = 2
	})
	waitOutput(t, out, "ReplacingMember: "+replacing)
	// the same request made again meanwhile, and refused (demo-1 is a learner then), is not this one's
	answer(t, c, key, etcdv1beta1.ReasonRequestRefused, "Refused etcd.etcdkit.dev/replace-member=demo-1: demo-1 is a learner being added to the cluster", nil)
	setStatus(t, c, func() etcdv1beta1.EtcdClusterStatus {
		st := healthyStatus()
		st.Members[1] = etcdv1beta1.MemberStatus{Name: "demo-1", ID: "5a1b2c3d4e5f6071", Role: etcdv1beta1.RoleLearner, Healthy: true}
		st.ReadyReplicas = 2
		return st
	}())
	setStatus(t, c, func() etcdv1beta1.EtcdClusterStatus {
		st := healthyStatus()
		st.Members[1].ID = "5a1b2c3d4e5f6071"
		return st
	}())
	r = <-done
	want := "Replaced member demo-1 of EtcdCluster replace/demo: member ID 5a1b2c3d4e5f6071, was 91bc3c398fb3c146; the cluster is Available with 3/3 members ready\n"
	if r.err != nil || !strings.HasSuffix(r.out.String(), want) {
		t.Errorf("replace-member: %v\n%s", r.err, r.out)
	}
}

// startWithInput is start with stdin reading input.
func startWithInput(input string, args ...string) (*testutil.SyncBuffer, <-chan result) {
	r := result{out: &testutil.SyncBuffer{}, errOut: &testutil.SyncBuffer{}}
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(input), Out: r.out, ErrOut: r.errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	done := make(chan result, 1)
	go func() {
		r.err = cmd.ExecuteContext(context.Background())
		done <- r
	}()
	return r.out, done
}

// runWithInput is run with stdin reading input.
func runWithInput(input string, args ...string) result {
	_, done := startWithInput(input, args...)
	return <-done
}
