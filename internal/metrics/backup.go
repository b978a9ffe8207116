package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// BackupDuration is how long successful backups took, from the start of the snapshot to the
	// stored manifest, in seconds, per cluster.
	BackupDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "etcd_operator_backup_duration_seconds",
		Help:    "Duration of successful backups (snapshot, verification and upload), in seconds.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"namespace", "cluster"})

	// BackupSize is the size of the newest successful backup of a cluster, in bytes.
	BackupSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_backup_size_bytes",
		Help: "Size of the newest successful backup of the cluster, in bytes.",
	}, []string{"namespace", "cluster"})

	// BackupLastSuccess is when the newest successful backup of a cluster completed, in seconds
	// since the epoch; time() minus it is the backup's age.
	BackupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_backup_last_success_timestamp_seconds",
		Help: "Completion time of the newest successful backup of the cluster, in seconds since the Unix epoch.",
	}, []string{"namespace", "cluster"})

	// CertificateNotAfter is when each certificate of a cluster's TLS expires, in seconds since the
	// epoch; certificate is "ca", "server", "peer" or "client".
	CertificateNotAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_certificate_not_after_timestamp_seconds",
		Help: "Expiry time of each certificate of the cluster's TLS (ca, server, peer, client), in seconds since the Unix epoch.",
	}, []string{"namespace", "cluster", "certificate"})

	// BackupFailures counts the backups that failed, per cluster.
	BackupFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_backup_failures_total",
		Help: "Backups that failed, per cluster.",
	}, []string{"namespace", "cluster"})
)

func init() {
	crmetrics.Registry.MustRegister(BackupDuration, BackupSize, BackupLastSuccess, BackupFailures, CertificateNotAfter)
}

// ForgetBackup drops the per-cluster backup series of a cluster that is gone.
func ForgetBackup(namespace, cluster string) {
	BackupSize.DeleteLabelValues(namespace, cluster)
	BackupLastSuccess.DeleteLabelValues(namespace, cluster)
	BackupDuration.DeleteLabelValues(namespace, cluster)
	BackupFailures.DeleteLabelValues(namespace, cluster)
}
