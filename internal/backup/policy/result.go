package policy

import "time"

// Role of the member a snapshot was taken from.
const (
	RoleFollower = "follower"
	RoleLeader   = "leader"
)

// Result describes a complete backup. It is the manifest's content, what `etcd-operator backup`
// prints, and the termination message from which the controller reports a backup Job's outcome.
type Result struct {
	// Key is the snapshot's key in the store; Location is where that is ("s3://bucket/prefix/key",
	// "file:///dir/key").
	Key      string `json:"key"`
	Location string `json:"location"`
	// SizeBytes is the snapshot's size in bytes.
	SizeBytes int64 `json:"sizeBytes"`
	// SHA256 is the hex sha256 of the snapshot as stored.
	SHA256 string `json:"sha256"`
	// Revision is the newest revision in the snapshot; TotalKeys the number of live keys; Hash
	// etcd's snapshot hash (crc32c of its buckets).
	Revision  int64  `json:"revision"`
	TotalKeys int    `json:"totalKeys"`
	Hash      uint32 `json:"hash"`
	// EtcdVersion is the version of the etcd server that produced the snapshot ("3.6.16"): it decides
	// which etcd can restore the snapshot. StorageVersion is the storage version recorded in the
	// database ("3.6.0"), as the snapshot holds it: empty for databases of etcd < 3.6, and for a
	// snapshot taken before the member recorded it (etcd 3.6 does so asynchronously, seconds after the
	// cluster version is decided, so a backup of a cluster seconds old may have none). Nothing
	// depends on it; it is reported for diagnosis.
	EtcdVersion    string `json:"etcdVersion"`
	StorageVersion string `json:"storageVersion,omitempty"`
	// Member is the hex ID of the member the snapshot was taken from, Endpoint its client URL and
	// Role RoleFollower or RoleLeader.
	Member   string `json:"member"`
	Endpoint string `json:"endpoint"`
	Role     string `json:"role"`
	// StartTime is when the backup started; CompletionTime when the snapshot was stored (the
	// manifest is written right after).
	StartTime      time.Time `json:"startTime"`
	CompletionTime time.Time `json:"completionTime"`
}
