package v1beta1

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// rawCluster returns cluster(opts...) as the API server sends it to a webhook, with change applied to
// its JSON spec (which can give a field a type the Go struct cannot hold).
func rawCluster(t *testing.T, change func(spec map[string]any), opts ...testutil.ClusterOption) []byte {
	t.Helper()
	c := cluster(opts...)
	c.SetGroupVersionKind(etcdv1beta1.GroupVersion.WithKind("EtcdCluster"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(m["spec"].(map[string]any))
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// admissionRequest is a request of operation op for the object raw (and, on update, the previous
// object old).
func admissionRequest(op admissionv1.Operation, raw, old []byte) admission.Request {
	r := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Operation: op}}
	r.Object.Raw, r.OldObject.Raw = raw, old
	return r
}

// responseJSON is r as JSON, its patches in the order of their paths (jsonpatch lists them in no
// fixed order).
func responseJSON(t *testing.T, r admission.Response) string {
	t.Helper()
	r.Patches = slices.Clone(r.Patches)
	sort.Slice(r.Patches, func(i, j int) bool { return r.Patches[i].Path < r.Patches[j].Path })
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDefaultingHandlerLeavesUndecodableObjectsToTheSchema: an object with a field of the wrong JSON
// type is allowed unchanged (the schema, which runs next, refuses it in its own words) where
// controller-runtime's defaulter alone would refuse it with Go's decoding error; every other request
// gets the defaulter's answer; and the validating webhook refuses what does not decode, so nothing
// undefaulted gets past both.
func TestDefaultingHandlerLeavesUndecodableObjectsToTheSchema(t *testing.T) {
	ctx := context.Background()
	defaulter := admission.WithDefaulter(testenv.Scheme, &EtcdClusterDefaulter{}).Handler
	h := newDefaultingHandler(testenv.Scheme, defaulter)
	validator := admission.WithValidator(testenv.Scheme, &EtcdClusterValidator{})
	valid := rawCluster(t, nil)

	for name, change := range map[string]func(map[string]any){
		`replicas "three"`:         func(s map[string]any) { s["replicas"] = "three" },
		"options.extraArgs a list": func(s map[string]any) { s["options"] = map[string]any{"extraArgs": []any{"--foo"}} },
		"storage a string":         func(s map[string]any) { s["storage"] = "1Gi" },
	} {
		raw := rawCluster(t, change)
		for _, req := range []admission.Request{admissionRequest(admissionv1.Create, raw, nil), admissionRequest(admissionv1.Update, raw, valid)} {
			t.Run(name+" "+string(req.Operation), func(t *testing.T) {
				if alone := defaulter.Handle(ctx, req); alone.Allowed || !strings.Contains(alone.Result.Message, "cannot unmarshal") {
					t.Fatalf("the defaulter alone answers %+v; the test no longer shows what the wrapper is for", alone.AdmissionResponse)
				}
				got := h.Handle(ctx, req)
				if !got.Allowed || len(got.Patches) != 0 || got.PatchType != nil {
					t.Errorf("got allowed %v, patches %v, patch type %v; want allowed with no patch", got.Allowed, got.Patches, got.PatchType)
				}
				if got.Result == nil || !strings.Contains(got.Result.Message, "left to the CRD's schema validation") {
					t.Errorf("got result %+v, want a message that says the object is left to the schema", got.Result)
				}
				if v := validator.Handle(ctx, req); v.Allowed {
					t.Errorf("the validating webhook allows the object: %+v", v.AdmissionResponse)
				}
			})
		}
	}

	t.Run("a decodable object is defaulted as before", func(t *testing.T) {
		raw := rawCluster(t, nil, testutil.WithVersion("v3.6.16"))
		for _, req := range []admission.Request{admissionRequest(admissionv1.Create, raw, nil), admissionRequest(admissionv1.Update, raw, valid)} {
			got, want := h.Handle(ctx, req), defaulter.Handle(ctx, req)
			gotJSON, wantJSON := responseJSON(t, got), responseJSON(t, want)
			if gotJSON != wantJSON {
				t.Errorf("%s: got %s, want the defaulter's %s", req.Operation, gotJSON, wantJSON)
			}
			if !got.Allowed || !strings.Contains(gotJSON, `"path":"/spec/version","value":"3.6.16"`) {
				t.Errorf("%s: got %s, want spec.version patched to 3.6.16", req.Operation, gotJSON)
			}
		}
	})
	t.Run("delete", func(t *testing.T) {
		req := admissionRequest(admissionv1.Delete, nil, valid)
		got, want := h.Handle(ctx, req), defaulter.Handle(ctx, req)
		if !got.Allowed || got.Result == nil || want.Result == nil || *got.Result != *want.Result {
			t.Errorf("got %+v, want the defaulter's %+v", got.AdmissionResponse, want.AdmissionResponse)
		}
	})
}
