package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// The day-2 requests (defrag, move-leader, replace-member) cannot reach etcd: the plugin sets an
// annotation on the EtcdCluster, the operator carries the request out and removes the annotation,
// with an event; the plugin follows the cluster until then and reads the outcome from the status and
// the events.

// eventSlack is how much earlier than the request an event may be stamped and still be the
// operator's answer to it: the operator's clock and the API server's differ a little, and the
// managedFields time the request is stamped with has whole seconds.
const eventSlack = 2 * time.Second

// dayTwo is one request being followed.
type dayTwo struct {
	c   client.Client
	key client.ObjectKey
	// annotation and value are the request.
	annotation, value string
	// since is when the request was made, less eventSlack: events of the answer are not older.
	since time.Time
	// start is when the command started, for the progress lines.
	start time.Time
	// progress receives the progress lines: the command's output, or its error stream with -o.
	progress io.Writer
	timeout  time.Duration
}

// requestFlags are the flags every request command has.
type requestFlags struct {
	timeout time.Duration
	output  string
}

// add adds --timeout (default def) and -o to cmd.
func (f *requestFlags) add(cmd *cobra.Command, def time.Duration, what string) {
	cmd.Flags().DurationVar(&f.timeout, "timeout", def, "How long to wait for the operator to "+what+" (the request stays when this runs out)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "Output format of the outcome: json or yaml (default: text; progress lines then go to stderr)")
}

// progressWriter returns where progress lines go: stdout, or stderr when -o asks for structured output.
func (f *requestFlags) progressWriter(cmd *cobra.Command) io.Writer {
	if f.output != "" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// send reads cluster key, refuses when it already has a request of annotation with another value
// (one the operator has not carried out yet), then merge-patches annotation=value onto it. It returns
// the cluster as read before the patch (what the status said then) and the request.
func send(cmd *cobra.Command, g *globals, f *requestFlags, name, annotation, value string) (*dayTwo, *etcdv1beta1.EtcdCluster, error) {
	c, ns, err := g.client()
	if err != nil {
		return nil, nil, err
	}
	ctx := cmd.Context()
	r := &dayTwo{c: c, key: client.ObjectKey{Namespace: ns, Name: name}, annotation: annotation, value: value,
		start: time.Now(), progress: f.progressWriter(cmd), timeout: f.timeout}
	before := &etcdv1beta1.EtcdCluster{}
	if err := c.Get(ctx, r.key, before); err != nil {
		return nil, nil, clusterGetError(err, ns, name)
	}
	if v, ok := before.Annotations[annotation]; ok && v != value {
		return nil, nil, fmt.Errorf("EtcdCluster %s already has the request %s=%s, which the operator has not carried out yet (`kubectl etcd status %s` says what it waits for): wait for it, or withdraw it with `kubectl -n %s annotate etcdcluster %s %s-`",
			r.key, annotation, v, name, ns, name, annotation)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: value}}})
	if err != nil {
		return nil, nil, err
	}
	after := &etcdv1beta1.EtcdCluster{}
	after.Namespace, after.Name = ns, name
	if err := c.Patch(ctx, after, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, nil, clusterGetError(err, ns, name)
	}
	// the newest managedFields time is the patch's, by the API server's clock, which the operator's
	// follows closely; the plugin's may not
	r.since = r.start
	var newest time.Time
	for _, mf := range after.ManagedFields {
		if mf.Time != nil && mf.Time.After(newest) {
			newest = mf.Time.Time
		}
	}
	if !newest.IsZero() && newest.Before(r.since) {
		r.since = newest
	}
	r.since = r.since.Add(-eventSlack)
	fmt.Fprintf(r.progress, "%s  EtcdCluster %s: asked the operator with %s=%s\n", elapsed(r.start), r.key, annotation, value)
	return r, before, nil
}

// outcome says whether the operator has answered a request whose annotation it removed: done with
// nil once it carried it out (and the status shows it), not done while the answer is not visible yet.
type outcome func(ec *etcdv1beta1.EtcdCluster, events []eventsv1.Event) (done bool, err error)

// follow reads the cluster every pollInterval, printing each change of its Progressing condition,
// until the operator removed the request and answered it: with a RequestRefused event about it (an
// error with the event's note), or as answered says. It returns the cluster as last read.
func (r *dayTwo) follow(parent context.Context, answered outcome) (*etcdv1beta1.EtcdCluster, error) {
	ctx, cancel := context.WithTimeout(parent, r.timeout)
	defer cancel()
	ec := &etcdv1beta1.EtcdCluster{}
	var shown string
	var gone time.Time // when the request was first seen gone from the cluster
	for {
		// Each read has a deadline of its own, not the wait's: a read started just before --timeout
		// ends completes (the client's rate limiter refuses a read the deadline would cut short), and
		// the wait then ends with what the cluster showed last.
		readCtx, cancelRead := context.WithTimeout(parent, readTimeout)
		err := r.c.Get(readCtx, r.key, ec)
		cancelRead()
		if err != nil && parent.Err() == nil {
			return nil, clusterGetError(err, r.key.Namespace, r.key.Name)
		}
		if p := meta.FindStatusCondition(ec.Status.Conditions, etcdv1beta1.ConditionProgressing); p != nil && p.Reason+p.Message != shown {
			shown = p.Reason + p.Message
			line := p.Reason
			if p.Message != "" {
				line += ": " + oneLine(p.Message)
			}
			fmt.Fprintf(r.progress, "%s  %s\n", elapsed(r.start), line)
		}
		if v, ok := ec.Annotations[r.annotation]; (!ok || v != r.value) && ctx.Err() == nil {
			if gone.IsZero() {
				gone = time.Now()
			}
			events, err := r.events(parent)
			if err != nil {
				return nil, err
			}
			switch answer := r.answer(events); {
			case answer != nil && answer.Reason == etcdv1beta1.ReasonRequestRefused:
				return nil, fmt.Errorf("the operator refused the request: %s", answer.Note)
			case answer != nil:
				if done, err := answered(ec, events); done || err != nil {
					return ec, err
				}
			case time.Since(gone) > withdrawnAfter:
				return nil, r.withdrawn(v, ok)
			}
		}
		select {
		case <-ctx.Done():
			return nil, r.notAnswered(ctx, ec)
		case <-time.After(pollInterval):
		}
	}
}

// readTimeout bounds one read of the cluster or its events while the plugin follows a request.
const readTimeout = 10 * time.Second

// withdrawnAfter is how long after the request is gone from the cluster the plugin waits for the
// operator's event about it before taking it as withdrawn: the operator records the event right after
// it removes the annotation.
const withdrawnAfter = 10 * time.Second

// answer returns the operator's first answer to the request among events (oldest first): a
// RequestRefused event about this value, or an event that names the request's annotation and value
// (the operator's events of a request carried out do: MovedLeader, Defragmented, ReplacingMember); nil
// when there is none. The first answer counts: a refusal of the same request made again after this
// one was carried out is not this one's.
func (r *dayTwo) answer(events []eventsv1.Event) *eventsv1.Event {
	for i := range events {
		e := &events[i]
		if e.Reason == etcdv1beta1.ReasonRequestRefused {
			if strings.Contains(e.Note, r.annotation+"="+r.value+":") {
				return e
			}
			continue
		}
		if strings.Contains(e.Note, r.annotation) && strings.Contains(e.Note, r.value) {
			return e
		}
	}
	return nil
}

// withdrawn is the error of a request that left the cluster without an answer from the operator:
// someone removed the annotation (now is false), or set another value (now is that value).
func (r *dayTwo) withdrawn(now string, set bool) error {
	what := "someone removed the annotation"
	if set {
		what = fmt.Sprintf("someone set it to %s", now)
	}
	return fmt.Errorf("the request %s=%s was withdrawn from EtcdCluster %s before the operator answered it (%s); the operator did not carry it out",
		r.annotation, r.value, r.key, what)
}

// notAnswered is the error of a request the operator had not answered when ctx ended.
func (r *dayTwo) notAnswered(ctx context.Context, ec *etcdv1beta1.EtcdCluster) error {
	within := "within " + r.timeout.String()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		within = "when interrupted"
	}
	if v, ok := ec.Annotations[r.annotation]; ok && v == r.value {
		return fmt.Errorf("the operator had not carried out %s=%s on EtcdCluster %s %s; the request stays and is carried out once the cluster allows it (`kubectl etcd status %s` says what it waits for), or withdraw it with `kubectl -n %s annotate etcdcluster %s %s-`",
			r.annotation, r.value, r.key, within, r.key.Name, r.key.Namespace, r.key.Name, r.annotation)
	}
	return fmt.Errorf("the operator removed %s=%s from EtcdCluster %s, but its outcome was not seen %s: `kubectl -n %s describe etcdcluster %s` shows its events",
		r.annotation, r.value, r.key, within, r.key.Namespace, r.key.Name)
}

// events returns the events about the cluster stamped since the request, oldest first.
func (r *dayTwo) events(ctx context.Context) ([]eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	list := &eventsv1.EventList{}
	if err := r.c.List(ctx, list, client.InNamespace(r.key.Namespace)); err != nil {
		return nil, fmt.Errorf("list the events of namespace %s: %w", r.key.Namespace, err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == r.key.Name && e.Regarding.Kind == "EtcdCluster" && !eventTime(&e).Before(r.since) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out, nil
}

// eventTime is when an event last happened: its series' last time for a repeated one.
func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

// memberStatus returns the status of member name, nil when the status does not list it.
func memberStatus(ec *etcdv1beta1.EtcdCluster, name string) *etcdv1beta1.MemberStatus {
	for i := range ec.Status.Members {
		if ec.Status.Members[i].Name == name {
			return &ec.Status.Members[i]
		}
	}
	return nil
}
