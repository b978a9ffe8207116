package observe

import (
	"testing"

	"github.com/etcdkit/etcd-operator/internal/etcd"
)

func TestAgreedLeader(t *testing.T) {
	st := map[uint64]etcd.EndpointStatus{1: {Leader: 2}, 2: {Leader: 2}, 3: {Leader: 3}, 4: {}}
	if got := AgreedLeader(st); got != 2 {
		t.Errorf("AgreedLeader = %d, want 2", got)
	}
	if AgreedLeader(map[uint64]etcd.EndpointStatus{1: {}}) != 0 {
		t.Errorf("no leader reported must give 0")
	}
}
