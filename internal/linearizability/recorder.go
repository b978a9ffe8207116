package linearizability

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// RequestTimeout bounds each request of RunClients' clients, and their dialing.
	RequestTimeout = 2 * time.Second
	// OpInterval is the pause of each of RunClients' clients between two requests.
	OpInterval = 20 * time.Millisecond
	// FailureBackoff is the pause after a request that failed: while the cluster refuses requests, a
	// client does not fill the history with writes of unknown outcome, each of which the checker must
	// place anywhere after its call.
	FailureBackoff = 500 * time.Millisecond
	// KeepAliveTime is how long a client of RunClients' connection may be idle before it pings the
	// server; not below etcd's default --grpc-keepalive-min-time of 5 s, which refuses faster pings.
	KeepAliveTime = 5 * time.Second
	// KeepAliveTimeout is how long a client of RunClients waits for the answer to a ping before it
	// closes the connection.
	KeepAliveTimeout = 2 * time.Second
)

// ErrEmptyValue is returned, without calling etcd, for a Put or CAS of the value "", which the model
// reserves for an absent key.
var ErrEmptyValue = errors.New("linearizability: a written value must not be empty")

// Recorder calls etcd and records each call as a porcupine.Operation: its Call and Return are
// nanoseconds since the Recorder was made, read from the monotonic clock, so that all clients share
// one time line. It is safe for concurrent use. Each *clientv3.Client gets the ClientId of the order
// in which the Recorder first saw it (0, 1, ...), for porcupine's visualization.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	ops     []porcupine.Operation
	clients map[*clientv3.Client]int
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), clients: map[*clientv3.Client]int{}}
}

// Put writes val to key through cli and records it. An error leaves the outcome unknown: the
// operation is recorded as such and the error returned. ErrEmptyValue when val is "" (not recorded).
func (r *Recorder) Put(ctx context.Context, cli *clientv3.Client, key, val string) error {
	if val == "" {
		return ErrEmptyValue
	}
	_, err := r.record(cli, Input{Kind: Put, Key: key, Value: val}, func() (Output, error) {
		_, err := cli.Put(ctx, key, val)
		return Output{}, err
	})
	return err
}

// Get reads key through cli with a linearizable read and records it; it returns the value, "" when
// the key is absent. A read that returns an error changed nothing and is not recorded.
func (r *Recorder) Get(ctx context.Context, cli *clientv3.Client, key string) (string, error) {
	out, err := r.record(cli, Input{Kind: Get, Key: key}, func() (Output, error) {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return Output{}, err
		}
		if len(resp.Kvs) == 0 {
			return Output{}, nil
		}
		return Output{Value: string(resp.Kvs[0].Value)}, nil
	})
	return out.Value, err
}

// CAS writes newVal to key through cli in one transaction if the key's value is expected, "" meaning
// that the key must be absent, and records it; it returns whether the comparison held and the write
// was applied. An error leaves the outcome unknown: the operation is recorded as such and the error
// returned. ErrEmptyValue when newVal is "" (not recorded).
func (r *Recorder) CAS(ctx context.Context, cli *clientv3.Client, key, expected, newVal string) (bool, error) {
	if newVal == "" {
		return false, ErrEmptyValue
	}
	// etcd fails a comparison of the value of an absent key whatever the value compared with, so
	// "absent" is compared by the key's creation revision, which is 0 only for an absent key.
	cmp := clientv3.Compare(clientv3.Value(key), "=", expected)
	if expected == "" {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	out, err := r.record(cli, Input{Kind: CAS, Key: key, Value: newVal, Expected: expected}, func() (Output, error) {
		resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, newVal)).Commit()
		if err != nil {
			return Output{}, err
		}
		return Output{Succeeded: resp.Succeeded}, nil
	})
	return out.Succeeded, err
}

// Operations returns a copy of the operations recorded so far, in the order they returned (those of
// unknown outcome in the order their error came back).
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Len is how many operations have been recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// record times call, then records in with what call returned: a failed read is dropped, a failed
// write is kept with an unknown outcome and a Return of math.MaxInt64.
func (r *Recorder) record(cli *clientv3.Client, in Input, call func() (Output, error)) (Output, error) {
	begin := r.now()
	out, err := call()
	end := r.now()
	if err != nil {
		if in.Kind == Get {
			return Output{}, err
		}
		out, end = Output{Unknown: true}, math.MaxInt64
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.clients[cli]
	if !ok {
		id = len(r.clients)
		r.clients[cli] = id
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: id, Input: in, Call: begin, Output: out, Return: end})
	return out, err
}

// now is the time since the Recorder was made, in nanoseconds, from the monotonic clock.
func (r *Recorder) now() int64 {
	return int64(time.Since(r.start))
}

// Key is the i-th key of RunClients' key space, "/linearizability/k<i>".
func Key(i int) string { return fmt.Sprintf("/linearizability/k%d", i) }

// RunClients runs clients goroutines, each with its own etcd client of endpoints (over TLS with tlsCfg unless nil), until ctx ends:
// every OpInterval (FailureBackoff after a request that failed) each makes one request, chosen at random (from math/rand/v2 seeded with seed and
// its index) among a Get (40 %), a Put (30 %) and a CAS from the last value it saw (30 %) of one of
// the keys Key(0) to Key(keys-1), and records it in rec. Each value written is unique, "c<client>-<n>".
// A request is given RequestTimeout whatever ctx does, so RunClients returns at most that long after
// ctx ends. Requests that fail are recorded, not returned; the error is that of a bad argument or of
// making a client.
func RunClients(ctx context.Context, endpoints []string, tlsCfg *tls.Config, clients, keys int, seed uint64, rec *Recorder) error {
	if clients < 1 || keys < 1 || len(endpoints) == 0 || rec == nil {
		return fmt.Errorf("linearizability: need clients, keys, endpoints and a recorder, got %d clients, %d keys, %d endpoints, recorder %p", clients, keys, len(endpoints), rec)
	}
	clis := make([]*clientv3.Client, 0, clients)
	defer func() {
		for _, c := range clis {
			_ = c.Close()
		}
	}()
	for i := range clients {
		c, err := clientv3.New(clientv3.Config{
			Endpoints: endpoints, DialTimeout: RequestTimeout, Logger: zap.NewNop(), TLS: tlsCfg,
			DialKeepAliveTime: KeepAliveTime, DialKeepAliveTimeout: KeepAliveTimeout,
		})
		if err != nil {
			return fmt.Errorf("linearizability: client %d of %v: %w", i, endpoints, err)
		}
		clis = append(clis, c)
	}
	var wg sync.WaitGroup
	for i, c := range clis {
		w := &worker{id: i, cli: c, rec: rec, keys: keys, rng: rand.New(rand.NewPCG(seed, uint64(i))), seen: map[string]string{}}
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	return nil
}

// worker is one client of RunClients.
type worker struct {
	id     int
	cli    *clientv3.Client
	rec    *Recorder
	keys   int
	rng    *rand.Rand
	writes int
	// seen is the last value the worker read or wrote per key, what its next CAS of the key expects.
	seen map[string]string
}

// run makes one request every OpInterval until ctx ends, FailureBackoff after one that failed.
func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		pause := OpInterval
		if err := w.step(ctx); err != nil {
			pause = FailureBackoff
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// step makes one request, given RequestTimeout even if ctx ends meanwhile, and returns its error.
func (w *worker) step(ctx context.Context) error {
	reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RequestTimeout)
	defer cancel()
	key := Key(w.rng.IntN(w.keys))
	switch n := w.rng.IntN(10); {
	case n < 4:
		v, err := w.rec.Get(reqCtx, w.cli, key)
		if err == nil {
			w.seen[key] = v
		}
		return err
	case n < 7:
		v := w.nextValue()
		err := w.rec.Put(reqCtx, w.cli, key, v)
		if err == nil {
			w.seen[key] = v
		}
		return err
	default:
		v := w.nextValue()
		ok, err := w.rec.CAS(reqCtx, w.cli, key, w.seen[key], v)
		if err == nil && ok {
			w.seen[key] = v
		}
		return err
	}
}

// nextValue is a value no other write of the run writes.
func (w *worker) nextValue() string {
	w.writes++
	return fmt.Sprintf("c%d-%d", w.id, w.writes)
}
