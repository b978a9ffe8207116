package model

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestDataUnreadable: what etcd 3.6.16 logged as it failed to start on a database overwritten with
// random bytes, and on a WAL with 400 bytes flipped (testdata: the last 2048 bytes of each log, what
// the kubelet keeps as the termination message), is taken for data that cannot be read, from the
// container's current or last termination; a failure of another kind, a log that does not say it, and
// a run that exited 0 are not.
func TestDataUnreadable(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	db, wal := read("etcd-db-invalid.log"), read("etcd-wal-corrupt.log")
	// etcd 3.6.16 on a database whose pages but not its meta pages were overwritten: bbolt's check of
	// a page's ID panics in bbolt.Open, and the tail of the log holds only the traceback
	pages := read("etcd-db-pages-overwritten.log")
	// the same with its panic line, as a shorter traceback leaves it in the tail
	open := "panic: assertion failed: Page expected to be: 4, but self identifies as 3473740952751874641\n\ngoroutine 106 [running]:\n" + pages[strings.Index(pages, "go.etcd.io/bbolt.(*Tx).page("):]
	// a fatal error of the Go runtime as bbolt opened the file: not the file's
	oom := "fatal error: runtime: out of memory\n\ngoroutine 106 [running]:\n" + pages[strings.Index(pages, "go.etcd.io/bbolt.Open("):]
	// a panic elsewhere in etcd
	elsewhere := "panic: assertion failed\n\ngoroutine 9 [running]:\ngo.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).apply(0x1)\n\tgo.etcd.io/etcd/server/v3@v3.6.16/etcdserver/server.go:1900 +0x1\n"
	line := func(level, msg, err string) string {
		return `{"level":"` + level + `","ts":"2026-12-05T16:29:58.389426Z","msg":"` + msg + `","error":"` + err + `"}` + "\n"
	}
	for _, tc := range []struct {
		name    string
		message string
		exit    int32
		last    bool // the termination is the last state (the container waits in CrashLoopBackOff)
		want    string
	}{
		{"database overwritten", db, 2, true, "failed to open database: invalid database"},
		{"database overwritten, container just exited", db, 2, false, "failed to open database: invalid database"},
		{"WAL corrupted", wal, 1, true, "bootstrap failed: proto: illegal wireType 7"},
		{"WAL record checksum", line("fatal", "discovery failed", "walpb: crc mismatch"), 1, true, "discovery failed: walpb: crc mismatch"},
		{"database pages overwritten", pages, 2, true, "panic opening the database, in go.etcd.io/bbolt.(*Tx).page"},
		{"database pages overwritten, the panic's line in the tail", open, 2, true, "panic opening the database: assertion failed: Page expected to be: 4, but self identifies as 3473740952751874641"},
		{"database meta checksum", line("panic", "failed to open database", "checksum error"), 2, true, "failed to open database: checksum error"},
		// not data that cannot be read: a restart, or another pod on the same data, may well start
		{"database not readable by the user", line("panic", "failed to open database", "open /var/lib/etcd/data/member/snap/db: permission denied"), 2, true, ""},
		{"database locked", line("panic", "failed to open database", "timeout"), 2, true, ""},
		{"a flag etcd refuses", line("fatal", "discovery failed", "unknown log level"), 1, true, ""},
		{"the log's tail starts after the line that says it", db[strings.Index(db, "panic: failed to open database"):], 2, true, ""},
		{"a run that exited 0", db, 0, true, ""},
		{"out of memory opening the database", oom, 2, true, ""},
		{"a panic that is not in bbolt.Open", elsewhere, 2, true, ""},
		{"a traceback cut before bbolt.Open", pages[:strings.Index(pages, "go.etcd.io/bbolt.Open(")], 2, true, ""},
	} {
		term := &corev1.ContainerStateTerminated{ExitCode: tc.exit, Reason: "Error", Message: tc.message}
		st := corev1.ContainerStatus{Name: resources.EtcdContainer}
		if tc.last {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
			st.LastTerminationState.Terminated = term
		} else {
			st.State.Terminated = term
		}
		m := &Member{Name: "demo-1", Pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}}
		if got := m.DataUnreadable(); got != tc.want {
			t.Errorf("%s: DataUnreadable() = %q, want %q", tc.name, got, tc.want)
		}
	}
	// the member's problem quotes the error too, not only the panic's message
	if got, want := ExitCause(db), "panic: failed to open database: invalid database"; got != want {
		t.Errorf("ExitCause(database overwritten) = %q, want %q", got, want)
	}
	// the pod's verify-data init container reads the WAL before etcd starts (what it said on a WAL with
	// 400 bytes flipped, and on one whose record fails its checksum); another failure of it is not taken
	for msg, want := range map[string]string{
		"error: cannot tell whether /var/lib/etcd/data is member 8e9e05c52164694d's: read the WAL's snapshot entries in /var/lib/etcd/data/member/wal: proto: illegal wireType 7\n": "verify-data read the WAL: proto: illegal wireType 7",
		"error: cannot tell whether /var/lib/etcd/data is member 95899508fa3e49a3's: read the WAL's snapshot entries in /var/lib/etcd/data/member/wal: walpb: crc mismatch\n":       "verify-data read the WAL: walpb: crc mismatch",
		"error: cannot tell whether /var/lib/etcd/data is member 95899508fa3e49a3's: open /var/lib/etcd/data/member/wal: permission denied\n":                                       "",
	} {
		vd := corev1.ContainerStatus{Name: resources.VerifyDataContainerName,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: msg}}}
		m := &Member{Name: "demo-1", Pod: &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{vd}}}}
		if got := m.DataUnreadable(); got != want {
			t.Errorf("verify-data said %q: DataUnreadable() = %q, want %q", msg, got, want)
		}
	}
	if got := (&Member{Name: "demo-1"}).DataUnreadable(); got != "" {
		t.Errorf("without a pod: %q, want none", got)
	}
	// a run after the failing one that did not fail so: only the most recent termination counts
	recovered := corev1.ContainerStatus{Name: resources.EtcdContainer,
		State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: line("fatal", "discovery failed", "unknown log level")}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: db}}}
	m := &Member{Name: "demo-1", Pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{recovered}}}}
	if got := m.DataUnreadable(); got != "" {
		t.Errorf("most recent run failed otherwise: %q, want none", got)
	}
}

// TestRaftLogLost: raft's panic on a commit index past the member's last log entry, as etcd's JSON
// line of level panic or as Go's panic line, is a raft log that lost acknowledged entries; the message
// is cut at its question. Another panic, a run that exited 0, or a crash loop without the line are not.
func TestRaftLogLost(t *testing.T) {
	const msg = "tocommit(357) is out of range [lastIndex(71)]. Was the raft log corrupted, truncated, or lost?"
	jsonLine := `{"level":"panic","ts":"2026-12-05T20:38:01.1Z","logger":"raft","caller":"etcdserver/zap_raft.go:101","msg":"` + msg + `","stacktrace":"go.etcd.io/raft/v3.(*raftLog).commitTo"}` + "\n"
	for _, tc := range []struct {
		name, message string
		exit          int32
		want          string
	}{
		{"raft's JSON line and Go's panic", jsonLine + "panic: " + msg + "\n\ngoroutine 171 [running]:\n", 2, "tocommit(357) is out of range [lastIndex(71)]"},
		{"Go's panic line alone", "panic: " + msg + "\n\ngoroutine 171 [running]:\n", 2, "tocommit(357) is out of range [lastIndex(71)]"},
		{"raft's JSON line alone", jsonLine, 2, "tocommit(357) is out of range [lastIndex(71)]"},
		{"another panic", "panic: assertion failed\n", 2, ""},
		{"a run that exited 0", jsonLine, 0, ""},
		{"an info line that quotes it", `{"level":"info","msg":"` + msg + `"}` + "\n", 2, ""},
	} {
		st := corev1.ContainerStatus{Name: resources.EtcdContainer,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: tc.exit, Reason: "Error", Message: tc.message}}}
		m := &Member{Name: "demo-1", Pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}}
		if got := m.RaftLogLost(); got != tc.want {
			t.Errorf("%s: RaftLogLost() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
