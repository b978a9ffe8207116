package v1beta1

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcdflags"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// MinStorageSize is the smallest spec.storage.size a cluster may ask for.
var MinStorageSize = resource.MustParse("64Mi")

// MaxStorageSize is the largest spec.storage.size a cluster may ask for: the largest volume the major
// clouds' block storage provisions (64TiB), far above what etcd uses (its backend quota, at most 100Gi,
// plus the WAL and snapshots). A larger size is a typo that no provisioner satisfies: the members'
// claims, and so the members, would stay pending.
var MaxStorageSize = resource.MustParse("64Ti")

// The warnings the webhook returns for changes that are allowed but risky. Each is a complete sentence
// that kubectl prints as "Warning: ...".
const (
	warnRoll       = "changing %s rolls every member one at a time; the leader last"
	warnRollBack   = "changing %s rolls, one at a time and the leader last, every member whose pod is not of the new spec: undoing the change that was rolled back restarts only the members on another spec"
	warnRebuild    = "changing %s before the cluster has formed: the pods of members whose etcd does not run are recreated with the new spec at once; the others roll one at a time once it has formed"
	warnOneMember  = "spec.replicas is 1: a single member has no fault tolerance: the cluster is unavailable whenever that member is down"
	warnQuota      = "spec.options.quotaBackendBytes %s is below the database size of member %s (%d bytes): etcd will raise NOSPACE and refuse writes until the database is compacted and defragmented below the quota"
	warnRetainGone = "spec.storage.retainPolicy is now Delete: the claims of removed members, and every claim when the cluster is deleted, are deleted with their data (existing claims too)"
	warnRestore    = "spec.recovery.restoreOnQuorumLoss is set: if quorum is lost and cannot come back (fewer than a quorum of members keep their data), the operator copies the members that kept their data (to spec.backup.destination), deletes the remaining members and recreates the cluster from the most up-to-date copy, a survivor's or a backup's; writes after that copy are lost"
	warnNoSchedule = "spec.recovery.restoreOnQuorumLoss is set but spec.backup.schedule is not: besides the copies of the members that kept their data, only EtcdBackups created by hand can be restored, and the newest may be old"
	warnNoDest     = "spec.recovery.restoreOnQuorumLoss is set but spec.backup.destination is not: after a quorum loss the members that kept their data cannot be copied, and the cluster is not recreated while one of them holds data; set spec.backup.destination"
)

// warnTLSSwitch are the warnings of switching TLS on or off for a running cluster, by port.
var warnTLSSwitch = map[string]string{
	"client": "turning TLS %s for the client port: every member serves both http:// and https:// on port 2379 for a grace period (2 minutes by default; the Progressing condition says until when), then only the new scheme: move clients over within it",
	"peer":   "turning TLS %s for the peer port updates each member's peer URL and restarts every member up to three times, one at a time",
}

// minMemoryLimit is the memory limit of the etcd container below which admission warns: etcd 3.6
// uses tens of MiB before it serves a request (8Mi does not start it; 20Mi starts it and loses it to
// the OOM killer within a minute, on the local cluster), and its memory grows with its database, its
// watchers and its clients' requests.
var minMemoryLimit = resource.MustParse("256Mi")

// memoryLimitWarning returns a warning when s sets a memory limit for the etcd container below
// minMemoryLimit and old (nil on create) did not set the same one; "" otherwise. A rolling update only
// sees each member start: a limit etcd outgrows later takes members down one after the other, and
// with them the quorum.
func memoryLimitWarning(old, s *etcdv1beta1.EtcdClusterSpec) string {
	limit := memoryLimit(s)
	if limit == nil || limit.Cmp(minMemoryLimit) >= 0 || (old != nil && sameQuantity(memoryLimit(old), limit)) {
		return ""
	}
	return fmt.Sprintf("spec.podTemplate.resources.limits.memory %s is below %s: etcd uses tens of MiB before it serves a request, and more as its database, watchers and requests grow; "+
		"a member over its limit is OOMKilled, and a rolling update only sees each member start, so a limit etcd outgrows later takes the members down one after the other and the quorum with them",
		limit.String(), minMemoryLimit.String())
}

// memoryLimit is s's memory limit of the etcd container, nil when it sets none.
func memoryLimit(s *etcdv1beta1.EtcdClusterSpec) *resource.Quantity {
	if s.PodTemplate == nil || s.PodTemplate.Resources == nil {
		return nil
	}
	if q, ok := s.PodTemplate.Resources.Limits[corev1.ResourceMemory]; ok {
		return &q
	}
	return nil
}

// restoreWarnings returns the warnings of turning spec.recovery.restoreOnQuorumLoss on (old nil: on
// create), or of a schedule or the backup destination going away while it is on.
func restoreWarnings(old, s *etcdv1beta1.EtcdClusterSpec) admission.Warnings {
	on := func(s *etcdv1beta1.EtcdClusterSpec) bool { return s.Recovery != nil && s.Recovery.RestoreOnQuorumLoss }
	scheduled := func(s *etcdv1beta1.EtcdClusterSpec) bool { return s.Backup != nil && s.Backup.Schedule != "" }
	if !on(s) {
		return nil
	}
	var w admission.Warnings
	if old == nil || !on(old) {
		w = append(w, warnRestore)
	}
	if !scheduled(s) && (old == nil || !on(old) || scheduled(old)) {
		w = append(w, warnNoSchedule)
	}
	if s.Backup == nil && (old == nil || !on(old) || old.Backup != nil) {
		w = append(w, warnNoDest)
	}
	return w
}

var specPath = field.NewPath("spec")

// ValidateCreate returns what is wrong with a new cluster, one field error per problem (each with its
// path under spec), and, when nothing is wrong, warnings about what is legal but risky. It expects the
// object as the API server passes it to validation: schema defaults applied and Default run. Empty
// errors mean c may be created.
func ValidateCreate(c *etcdv1beta1.EtcdCluster) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	s := &c.Spec
	if s.Replicas != nil {
		errs = append(errs, validateReplicas(*s.Replicas)...)
		if *s.Replicas == 1 {
			warnings = append(warnings, warnOneMember)
		}
	}
	errs = append(errs, validateVersion(specVersion(s))...)
	errs = append(errs, validateImage(s.Image)...)
	errs = append(errs, validateImageTag(nil, s)...)
	errs = append(errs, validateStorage(nil, &s.Storage)...)
	errs = append(errs, validateQuotaFits(nil, s)...)
	errs = append(errs, validateEtcdFlags(nil, s)...)
	errs = append(errs, validateSchedules(nil, s)...)
	errs = append(errs, validateRestoreSource(s.Bootstrap)...)
	errs = append(errs, validateNetworkPolicy(s.NetworkPolicy)...)
	errs = append(errs, validateAuth(c)...)
	errs = append(errs, validateAuthRecovery(c)...)
	errs = append(errs, validateTLSSecrets(c)...)
	errs = append(errs, validateOwnedMetadata(nil, s.PodTemplate)...)
	warnings = append(warnings, restoreWarnings(nil, s)...)
	if w := memoryLimitWarning(nil, s); w != "" {
		warnings = append(warnings, w)
	}
	if len(errs) > 0 {
		warnings = nil
	}
	return errs, warnings
}

// ValidateUpdate returns what is wrong with the change from old to c, one field error per problem,
// and, when nothing is wrong, warnings about what the change will do that users should know first. Only what changed is
// checked: an update that leaves the spec as it is (labels, finalizers) is always allowed, so an object
// admitted under older rules can still be relabelled and deleted. Version changes are checked against
// what the members run (old.Status.CurrentVersion) as well as against old.Spec.Version.
func ValidateUpdate(old, c *etcdv1beta1.EtcdCluster) (field.ErrorList, admission.Warnings) {
	o, s := &old.Spec, &c.Spec
	rolled, tlsWarnings := rolledFields(o, s)
	if len(rolled) == 0 && equality.Semantic.DeepEqual(o, s) {
		return nil, nil
	}
	var errs field.ErrorList
	var warnings admission.Warnings

	if !ptr.Equal(o.Replicas, s.Replicas) && s.Replicas != nil {
		errs = append(errs, validateReplicas(*s.Replicas)...)
		if *s.Replicas == 1 && (o.Replicas == nil || *o.Replicas > 1) {
			warnings = append(warnings, warnOneMember)
		}
	}
	errs = append(errs, validateVersionChange(old, specVersion(s))...)
	errs = append(errs, validateImageWithVersion(old, c)...)
	errs = append(errs, validateImageChange(o.Image, s.Image)...)
	errs = append(errs, validateImageTag(o, s)...)
	errs = append(errs, validateStorage(&o.Storage, &s.Storage)...)
	errs = append(errs, validateQuotaFits(o, s)...)
	errs = append(errs, validateEtcdFlags(o, s)...)
	errs = append(errs, validateSchedules(o, s)...)
	errs = append(errs, validateAuthUpdate(old, c)...)
	errs = append(errs, validateSecurityUpdate(old, c)...)
	errs = append(errs, validateOwnedMetadata(o.PodTemplate, s.PodTemplate)...)

	warnings = append(warnings, tlsWarnings...)
	if len(rolled) > 0 {
		warn := warnRoll
		if old.Status.Phase == etcdv1beta1.PhaseCreating && old.Status.ClusterID == "" {
			warn = warnRebuild // see verdict.BootstrapPodToRebuild
		} else if p := meta.FindStatusCondition(old.Status.Conditions, etcdv1beta1.ConditionProgressing); p != nil && p.Reason == etcdv1beta1.ReasonRolloutFailed {
			warn = warnRollBack // every member may still run the spec this change goes back to
		}
		warnings = append(warnings, fmt.Sprintf(warn, strings.Join(rolled, ", ")))
		errs = append(errs, validateOnlyCopy(o, s, rolled)...)
	}
	if w := quotaWarning(old, c); w != "" {
		warnings = append(warnings, w)
	}
	if retainPolicy(&s.Storage) == etcdv1beta1.RetainPolicyDelete && retainPolicy(&o.Storage) != etcdv1beta1.RetainPolicyDelete {
		warnings = append(warnings, warnRetainGone)
	}
	warnings = append(warnings, restoreWarnings(o, s)...)
	if w := memoryLimitWarning(o, s); w != "" {
		warnings = append(warnings, w)
	}
	if len(errs) > 0 {
		// The change is refused: what it would have done does not matter yet.
		warnings = nil
	}
	return errs, warnings
}

// rolledFields returns the paths of the fields whose change from o to s rolls the members (version,
// image, pod template, options, and the TLS switches), and the warnings of the TLS switches. The pod
// template and the options are compared as resources.Options.SpecHash hashes them
// (resources.PodTemplateKey, resources.OptionsKey): a change rolls the members exactly when it
// builds different pods, so an empty template ({}) is no change from none, and
// topologySpreadConstraints: [] (no constraint) is one from an absent list (the default spread).
func rolledFields(o, s *etcdv1beta1.EtcdClusterSpec) (rolled []string, warnings admission.Warnings) {
	if specVersion(o) != specVersion(s) {
		rolled = append(rolled, "spec.version")
	}
	if o.Image != s.Image {
		rolled = append(rolled, "spec.image")
	}
	if !bytes.Equal(resources.PodTemplateKey(o.PodTemplate), resources.PodTemplateKey(s.PodTemplate)) {
		rolled = append(rolled, "spec.podTemplate")
	}
	if !bytes.Equal(resources.OptionsKey(o.Options), resources.OptionsKey(s.Options)) {
		rolled = append(rolled, "spec.options")
	}
	tlsRolled, tlsWarnings := tlsSwitches(o, s)
	return append(rolled, tlsRolled...), tlsWarnings
}

// validateOnlyCopy refuses a change that restarts the only member of a 1-member emptyDir cluster: an
// emptyDir lives and dies with its pod, so the restart would delete the cluster's only copy of its data.
func validateOnlyCopy(o, s *etcdv1beta1.EtcdClusterSpec, rolled []string) field.ErrorList {
	if s.Storage.EmptyDir == nil || s.ReplicasOrDefault() != 1 || o.ReplicasOrDefault() != 1 {
		return nil
	}
	return field.ErrorList{field.Forbidden(specPath, fmt.Sprintf(
		"changing %s restarts the only member of this 1-member emptyDir cluster, which deletes the cluster's only copy of its data (an emptyDir lives and dies with its pod): scale to 3 members first (spec.replicas: 3; the new members copy the data), make the change, then scale back to 1; or restore a backup into a new EtcdCluster",
		strings.Join(rolled, ", ")))}
}

// validateReplicas checks that r is an odd number of members from 1 to 9.
func validateReplicas(r int32) field.ErrorList {
	p := specPath.Child("replicas")
	switch {
	case r < 1:
		return field.ErrorList{field.Invalid(p, r, "must be 1, 3, 5, 7 or 9: a cluster has at least one member (to remove the cluster, delete the EtcdCluster)")}
	case r > 9:
		return field.ErrorList{field.Invalid(p, r, "must be 1, 3, 5, 7 or 9: more than 9 members slow every write down (each waits for a quorum) without a useful gain in fault tolerance")}
	case r%2 == 0:
		return field.ErrorList{field.Invalid(p, r, fmt.Sprintf("must be odd (1, 3, 5, 7 or 9): %d members tolerate no more failures than %d (a quorum of %d is %d) and only add load and risk", r, r-1, r, membership.Quorum(int(r))))}
	}
	return nil
}

// specVersion is the spec's version as the API server stores it: the schema defaults an empty one.
func specVersion(s *etcdv1beta1.EtcdClusterSpec) string {
	if s.Version == "" {
		return etcdv1beta1.DefaultVersion
	}
	return strings.TrimPrefix(s.Version, "v")
}

// validateVersion checks that v is a version of a minor the operator runs.
func validateVersion(v string) field.ErrorList {
	p := specPath.Child("version")
	parsed, err := version.Parse(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, err.Error())}
	}
	if !version.IsSupported(parsed) {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("etcd %s is not supported: supported minors are %s, such as %s",
			parsed.MinorString(), strings.Join(version.Supported, ", "), etcdv1beta1.DefaultVersion))}
	}
	return nil
}

// validateVersionChange checks that the members of old may be changed to run etcd to, per etcd's
// upgrade policy: from what they run (status.currentVersion, when the operator has reported it) and
// from the version they are already being changed to (old spec.version). Going back to the version
// every member still runs (status.members[].version) is allowed: it cancels a change no member has
// taken, such as one to a release that has no image, whose first member waits for an image pull.
func validateVersionChange(old *etcdv1beta1.EtcdCluster, to string) field.ErrorList {
	p := specPath.Child("version")
	inSpec := specVersion(&old.Spec)
	if to == inSpec || everyMemberRuns(old, to) || neverFormedSameMinor(old, inSpec, to) {
		return nil
	}
	running := inSpec
	if cv := old.Status.CurrentVersion; cv != "" {
		if _, err := version.Parse(cv); err == nil {
			running = strings.TrimPrefix(cv, "v")
		}
	}
	if err := version.CheckUpgrade(running, to); err != nil {
		return field.ErrorList{field.Invalid(p, to, err.Error())}
	}
	if running != inSpec {
		if err := version.CheckUpgrade(inSpec, to); err != nil {
			return field.ErrorList{field.Invalid(p, to, fmt.Sprintf(
				"the members (on %s) are being changed to %s already: %v", running, inSpec, err))}
		}
	}
	return nil
}

// neverFormedSameMinor reports whether c has never formed (no cluster ID, current version or member's
// version in its status: no etcd has answered) and from and to are patch releases of one minor: the first
// members may wait for an image that does not exist (a typo in spec.version), and going back to a patch
// release that exists is then no downgrade of any data. A minor change stays refused by the CRD.
func neverFormedSameMinor(c *etcdv1beta1.EtcdCluster, from, to string) bool {
	if c.Status.ClusterID != "" || c.Status.CurrentVersion != "" || slices.ContainsFunc(c.Status.Members, func(m etcdv1beta1.MemberStatus) bool { return m.Version != "" }) {
		return false
	}
	return minorOf(from) != "" && minorOf(from) == minorOf(to)
}

// everyMemberRuns reports whether the status of c shows every member on v: each member reports version
// v, or reports none because its etcd container waits for an image it cannot pull (so it never ran what
// the spec asks now), and at least one reports v. A member that does not answer for another reason may
// be restarting onto the spec's version: then it is false.
func everyMemberRuns(c *etcdv1beta1.EtcdCluster, v string) bool {
	recorded := 0
	for _, m := range c.Status.Members {
		switch {
		case m.Version == "" && model.ImagePullProblem(m.Problem):
			continue
		case strings.TrimPrefix(m.Version, "v") != v:
			return false
		}
		recorded++
	}
	return recorded > 0
}

// validateImage checks that image, when set, is an image reference a container runtime can pull:
// without one, every member the operator creates or rolls waits with InvalidImageName or ErrImagePull.
func validateImage(image string) field.ErrorList {
	if image == "" {
		return nil
	}
	if _, err := name.ParseReference(image); err == nil && !strings.Contains(image, "://") {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("image"), image,
		`is not an image reference: write [registry[:port]/]repository[:tag][@sha256:digest], with the repository in lower case and without spaces or a URL scheme, such as "registry.example/etcd:v3.6.16", or remove spec.image to run the operator's etcd image of spec.version`)}
}

// validateImageChange checks spec.image when an update changes it from old.
func validateImageChange(old, image string) field.ErrorList {
	if image == old {
		return nil
	}
	return validateImage(image)
}

// validateImageTag refuses a spec.image whose tag names an etcd release other than spec.version (its
// default when unset): the members would run one release while the operator chose their flags, the
// upgrade path and its checks for the other. The release is what the tag says before its first "-"
// (v3.6.16, 3.5.21-0, v3.6.16-amd64, 3.5.35-debian-12-r1), with or without a digest after it; a tag
// that names no release (latest, a commit) and an image by digest alone are not checked. On an update
// (o not nil) only a change of the image is: a version changed alone under a set image is
// validateImageWithVersion's.
func validateImageTag(o, s *etcdv1beta1.EtcdClusterSpec) field.ErrorList {
	if s.Image == "" || (o != nil && o.Image == s.Image) {
		return nil
	}
	image, _, _ := strings.Cut(s.Image, "@")
	ref, err := name.NewTag(image) // without a tag of its own, "latest", which names no release
	if err != nil {
		return nil
	}
	release, _, _ := strings.Cut(ref.TagStr(), "-")
	v, err := version.Parse(release)
	if err != nil || v.String() == specVersion(s) {
		return nil
	}
	unset := ""
	if s.Version == "" {
		unset = fmt.Sprintf(" (unset, it is %s)", etcdv1beta1.DefaultVersion)
	}
	return field.ErrorList{field.Invalid(specPath.Child("version"), specVersion(s), fmt.Sprintf(
		"spec.image %s is tagged as etcd %s, and spec.version%s says %s: set spec.version: %q with it, or use an image of etcd %s (the operator chooses the members' flags, the upgrade path and its checks by spec.version)",
		s.Image, v, unset, specVersion(s), v.String(), specVersion(s)))}
}

// validateImageWithVersion refuses a version change that would change nothing: with spec.image set,
// the image decides what the members run, so the version must change together with it.
func validateImageWithVersion(old, c *etcdv1beta1.EtcdCluster) field.ErrorList {
	if c.Spec.Image == "" || specVersion(&old.Spec) == specVersion(&c.Spec) || old.Spec.Image != c.Spec.Image {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("version"), c.Spec.Version, fmt.Sprintf(
		"spec.image (%s) is set and decides what the members run: change spec.image to an image of etcd %s in the same update, or remove spec.image", c.Spec.Image, c.Spec.Version))}
}

// validateStorage checks s, and when old is not nil (an update) the change from old to s: the size is
// from MinStorageSize to MaxStorageSize and never shrinks or goes away, the class never changes, and members never
// switch between emptyDir and persistent volumes.
func validateStorage(old, s *etcdv1beta1.StorageSpec) field.ErrorList {
	p := specPath.Child("storage")
	var errs field.ErrorList
	if mixesEmptyDir(s) && (old == nil || !mixesEmptyDir(old)) {
		errs = append(errs, field.Forbidden(p.Child("emptyDir"),
			"cannot be combined with storage.size or storage.storageClassName: emptyDir members keep their data on the node, not in a claim"))
	}
	if s.Size != nil && (old == nil || !sameQuantity(old.Size, s.Size)) {
		switch {
		case s.Size.Cmp(MinStorageSize) < 0:
			errs = append(errs, field.Invalid(p.Child("size"), s.Size.String(),
				fmt.Sprintf("must be at least %s, such as 1Gi", MinStorageSize.String())))
		case s.Size.Cmp(MaxStorageSize) > 0:
			errs = append(errs, field.Invalid(p.Child("size"), s.Size.String(),
				fmt.Sprintf("must be at most %s, such as 10Gi: no common storage provisions a larger volume, so the members' claims would stay pending, and etcd uses at most its backend quota (spec.options.quotaBackendBytes, at most 100Gi) plus its WAL and snapshots", MaxStorageSize.String())))
		}
	}
	if limit := sizeLimit(s); limit != nil && (old == nil || !sameQuantity(sizeLimit(old), limit)) && limit.Cmp(MinStorageSize) < 0 {
		errs = append(errs, field.Invalid(p.Child("emptyDir", "sizeLimit"), limit.String(), fmt.Sprintf(
			"must be at least %s, such as 1Gi: etcd preallocates its write-ahead log in 64MB files, so a member with less cannot start, or is evicted as soon as it does", MinStorageSize.String())))
	}
	if old == nil {
		return errs
	}
	switch {
	case old.Size != nil && s.Size == nil:
		errs = append(errs, field.Forbidden(p.Child("size"),
			fmt.Sprintf("cannot be removed once set (it is %s): it may only grow", old.Size.String())))
	case old.Size != nil && s.Size.Cmp(*old.Size) < 0:
		errs = append(errs, field.Invalid(p.Child("size"), s.Size.String(),
			fmt.Sprintf("may only grow: it is %s, and shrinking a volume is not supported", old.Size.String())))
	case old.Size == nil && old.EmptyDir == nil && s.Size != nil && s.Size.Cmp(resources.DefaultStorageSize) < 0 && s.Size.Cmp(MinStorageSize) >= 0:
		errs = append(errs, field.Invalid(p.Child("size"), s.Size.String(),
			fmt.Sprintf("may only grow: it was unset, so the members' claims have the default %s, and shrinking a volume is not supported", resources.DefaultStorageSize.String())))
	}
	if !ptr.Equal(old.StorageClassName, s.StorageClassName) {
		was := "the cluster's default class"
		if old.StorageClassName != nil {
			was = fmt.Sprintf("%q", *old.StorageClassName)
		}
		errs = append(errs, field.Forbidden(p.Child("storageClassName"),
			fmt.Sprintf("is immutable (it is %s): the members' claims keep the class they were created with", was)))
	}
	if (old.EmptyDir != nil) != (s.EmptyDir != nil) {
		errs = append(errs, field.Forbidden(p.Child("emptyDir"),
			"storage cannot be switched between emptyDir and persistent volumes after creation: the members' data would not follow"))
	}
	return errs
}

// sizeLimit is s's storage.emptyDir.sizeLimit, nil when it has none.
func sizeLimit(s *etcdv1beta1.StorageSpec) *resource.Quantity {
	if s.EmptyDir == nil {
		return nil
	}
	return s.EmptyDir.SizeLimit
}

// quota is s's spec.options.quotaBackendBytes, nil when it is unset.
func quota(s *etcdv1beta1.EtcdClusterSpec) *resource.Quantity {
	if s.Options == nil {
		return nil
	}
	return s.Options.QuotaBackendBytes
}

// validateQuotaFits refuses a backend quota that the members' volumes cannot hold, checked on create
// (old nil) and when the quota or the volume size changes. On claims, a quota that is set must be
// below storage.size (the default size when it is unset): a full volume crashes etcd, where the quota
// would have raised NOSPACE (writes refused, reads served) and the claim could have been grown. On an
// emptyDir with a sizeLimit, the quota, set or etcd's default of 2Gi, must be below the limit: the
// kubelet evicts a member whose emptyDir outgrows it, and its data goes with the pod; the members hold
// the same data, so they would all go at about the same time.
func validateQuotaFits(old, s *etcdv1beta1.EtcdClusterSpec) field.ErrorList {
	q := quota(s)
	if old != nil && sameQuantity(quota(old), q) && sameQuantity(old.Storage.Size, s.Storage.Size) && sameQuantity(sizeLimit(&old.Storage), sizeLimit(&s.Storage)) {
		return nil
	}
	qp := specPath.Child("options", "quotaBackendBytes")
	room := "keeping room for the write-ahead log and snapshots"
	if s.Storage.EmptyDir != nil {
		limit := sizeLimit(&s.Storage)
		if limit == nil || limit.Cmp(MinStorageSize) < 0 { // no limit, or validateStorage refuses it
			return nil
		}
		evicted := "the kubelet evicts a member whose emptyDir grows past its sizeLimit, and the member's data goes with its pod; the members hold the same data, so they would be evicted at about the same time and the cluster would lose its data, where the quota would have raised NOSPACE (writes refused, reads served)"
		if q == nil {
			def := resource.NewQuantity(resources.DefaultQuotaBackendBytes, resource.BinarySI)
			if limit.Cmp(*def) > 0 {
				return nil
			}
			return field.ErrorList{field.Invalid(specPath.Child("storage", "emptyDir", "sizeLimit"), limit.String(), fmt.Sprintf(
				"must be above etcd's default backend quota of %s, since spec.options.quotaBackendBytes is unset: %s; set spec.options.quotaBackendBytes below sizeLimit, or raise sizeLimit, %s", def.String(), evicted, room))}
		}
		if q.Cmp(*limit) < 0 {
			return nil
		}
		return field.ErrorList{field.Invalid(qp, q.String(), fmt.Sprintf(
			"must be below storage.emptyDir.sizeLimit (%s): %s; lower quotaBackendBytes or raise sizeLimit, %s", limit.String(), evicted, room))}
	}
	if q == nil || s.Storage.Size != nil && (s.Storage.Size.Cmp(MinStorageSize) < 0 || s.Storage.Size.Cmp(MaxStorageSize) > 0) {
		return nil // nothing to check, or validateStorage refuses the size
	}
	size, which := resources.DefaultStorageSize, fmt.Sprintf("the members' volume size, %s (storage.size is unset: the default)", resources.DefaultStorageSize.String())
	if s.Storage.Size != nil {
		size, which = *s.Storage.Size, fmt.Sprintf("storage.size (%s)", s.Storage.Size.String())
	}
	if q.Cmp(size) < 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(qp, q.String(), fmt.Sprintf(
		"must be below %s: the volume would fill up before the database reached its quota, and a full volume crashes etcd, where the quota would have raised NOSPACE (writes refused, reads served); lower quotaBackendBytes or grow storage.size, %s", which, room))}
}

// mixesEmptyDir reports whether s asks for emptyDir members and for claim settings at once.
func mixesEmptyDir(s *etcdv1beta1.StorageSpec) bool {
	return s.EmptyDir != nil && (s.Size != nil || s.StorageClassName != nil)
}

// sameQuantity reports whether a and b are both unset or both set to the same amount ("1Gi" and
// "1024Mi" are the same).
func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

// specExtraArgs is s's spec.options.extraArgs, nil when it has none.
func specExtraArgs(s *etcdv1beta1.EtcdClusterSpec) map[string]string {
	if s.Options == nil {
		return nil
	}
	return s.Options.ExtraArgs
}

// validateExtraArgs refuses the flags of args that the operator sets itself or that put the cluster at
// risk (v1beta1.ReservedFlag), keys that are not flag names, flags that etcd accepts only to ignore
// (etcdflags.Ignored: the entry would have no effect), flags that etcd of minor (the spec's, "3.6")
// does not have (etcd refuses to start on an unknown flag: each member would crash-loop) and
// values with control characters, except entries already in old with the same value, so that an
// object admitted before a rule existed can still be changed otherwise; a change of minor from
// oldMinor checks every flag against the new minor's. Errors are sorted by flag name.
func validateExtraArgs(old, args map[string]string, oldMinor, minor string) field.ErrorList {
	p := specPath.Child("options", "extraArgs")
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs field.ErrorList
	for _, k := range keys {
		v := args[k]
		if was, ok := old[k]; ok && was == v {
			if oldMinor != minor {
				errs = append(errs, unknownFlag(p.Key(k), k, minor)...)
			}
			continue
		}
		if why, reserved := etcdv1beta1.ReservedFlag(k); reserved {
			errs = append(errs, field.Forbidden(p.Key(k), "cannot be set through extraArgs: "+why))
			continue
		}
		if problem := etcdv1beta1.ExtraArgKeyProblem(k); problem != "" {
			errs = append(errs, field.Invalid(p.Key(k), k, "the key "+problem))
		} else if slices.Contains(etcdflags.Ignored, k) {
			errs = append(errs, field.Forbidden(p.Key(k), "etcd accepts --"+k+" only to ignore it (a flag of etcd 2): it would have no effect"))
		} else {
			errs = append(errs, unknownFlag(p.Key(k), k, minor)...)
		}
		if problem := etcdv1beta1.ExtraArgValueProblem(v); problem != "" {
			errs = append(errs, field.Invalid(p.Key(k), v, problem))
		}
	}
	return errs
}

// validateEtcdFlags returns what is wrong with the etcd flags s gives (old nil on create, else the
// spec before the change): validateExtraArgs's errors, or when there are none, validateOptionValues's
// (an unknown flag would be reported twice).
func validateEtcdFlags(old, s *etcdv1beta1.EtcdClusterSpec) field.ErrorList {
	var oldArgs map[string]string
	var oldOpts *etcdv1beta1.EtcdOptions
	oldMinor, minor := "", minorOf(specVersion(s))
	if old != nil {
		oldArgs, oldOpts, oldMinor = specExtraArgs(old), old.Options, minorOf(specVersion(old))
	}
	if errs := validateExtraArgs(oldArgs, specExtraArgs(s), oldMinor, minor); len(errs) > 0 {
		return errs
	}
	return validateOptionValues(oldOpts, s.Options, oldMinor, minor)
}

// validateOptionValues refuses the values of spec.options that etcd of minor ("3.6") refuses before it
// starts, as etcd's own flag parsing and validation find them (etcdflags.Check): a value a flag's type
// does not parse, a log level etcd does not know, a heartbeat interval above a fifth of the election
// timeout. Every member restarted with them would crash-loop. An entry of extraArgs that etcd refuses
// with the typed options is named; a combination of entries is refused on spec.options. Entries of old
// with the same value are left out (an object admitted before the rule existed can still be changed
// otherwise), unless the minor changed from oldMinor; nothing is checked when the options and the
// minor are unchanged, or for a minor other than the one the operator is built against.
func validateOptionValues(old, opts *etcdv1beta1.EtcdOptions, oldMinor, minor string) field.ErrorList {
	if opts == nil || (oldMinor == minor && equality.Semantic.DeepEqual(old, opts)) {
		return nil
	}
	var oldArgs map[string]string
	if old != nil && oldMinor == minor {
		oldArgs = old.ExtraArgs
	}
	typed := opts.DeepCopy()
	typed.ExtraArgs = nil
	args := resources.OptionArgs(typed)
	p := specPath.Child("options", "extraArgs")
	var errs field.ErrorList
	checked := slices.Clone(args)
	for _, k := range slices.Sorted(maps.Keys(opts.ExtraArgs)) {
		v := opts.ExtraArgs[k]
		if was, ok := oldArgs[k]; ok && was == v {
			continue
		}
		arg := "--" + k + "=" + v
		checked = append(checked, arg)
		if err := etcdflags.Check(minor, append(slices.Clone(args), arg)); err != nil {
			errs = append(errs, field.Invalid(p.Key(k), v, refusedByEtcd(minor, err)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if err := etcdflags.Check(minor, checked); err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("options"), strings.Join(checked, " "), refusedByEtcd(minor, err))}
	}
	return nil
}

// refusedByEtcd is the message of an option etcd of minor refuses with err.
func refusedByEtcd(minor string, err error) string {
	return fmt.Sprintf("etcd %s refuses it as it starts (%v), so every member restarted with it would crash-loop: check the value against `etcd --help` of that release", minor, err)
}

// unknownFlag refuses name at path p when etcd of minor ("3.6") has no such flag, per its own flag set
// (package etcdflags); a minor the operator holds no flag list for is not checked.
func unknownFlag(p *field.Path, name, minor string) field.ErrorList {
	if known, _ := etcdflags.Known(minor, name); known {
		return nil
	}
	return field.ErrorList{field.Invalid(p, name, fmt.Sprintf(
		"etcd %s has no flag --%s and would refuse to start with it: check the name against `etcd --help` of that release", minor, name))}
}

// minorOf returns the "major.minor" of version v ("3.6.16" → "3.6"), "" when v does not parse.
func minorOf(v string) string {
	parsed, err := version.Parse(v)
	if err != nil {
		return ""
	}
	return parsed.MinorString()
}

// quotaWarning returns a warning when c's backend quota, new or changed, is below the database of a
// member as last reported in old's status; "" otherwise.
func quotaWarning(old, c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.Options == nil || c.Spec.Options.QuotaBackendBytes == nil {
		return ""
	}
	q := c.Spec.Options.QuotaBackendBytes
	if old.Spec.Options != nil && sameQuantity(old.Spec.Options.QuotaBackendBytes, q) {
		return ""
	}
	var largest etcdv1beta1.MemberStatus
	for _, m := range old.Status.Members {
		if m.DBSizeBytes > largest.DBSizeBytes {
			largest = m
		}
	}
	if largest.DBSizeBytes == 0 || q.Value() >= largest.DBSizeBytes {
		return ""
	}
	return fmt.Sprintf(warnQuota, q.String(), largest.Name, largest.DBSizeBytes)
}

// retainPolicy is s's retain policy as the API server stores it: the schema defaults an empty one.
func retainPolicy(s *etcdv1beta1.StorageSpec) etcdv1beta1.RetainPolicy {
	if s.RetainPolicy == "" {
		return etcdv1beta1.RetainPolicyDelete
	}
	return s.RetainPolicy
}

// tlsSwitches returns the spec.tls fields that switch a port's TLS on or off from o to s, or rename
// the Secrets of spec.tls.secrets, which roll the members, and a warning for each switch that says what
// it does.
func tlsSwitches(o, s *etcdv1beta1.EtcdClusterSpec) (rolled []string, warnings admission.Warnings) {
	for _, p := range []struct {
		name     string
		old, new bool
	}{{"client", o.ClientTLS(), s.ClientTLS()}, {"peer", o.PeerTLS(), s.PeerTLS()}} {
		if p.old != p.new {
			rolled = append(rolled, "spec.tls."+p.name+".enabled")
			warnings = append(warnings, fmt.Sprintf(warnTLSSwitch[p.name], onOff(p.new)))
		}
	}
	if o.UserTLSSecrets() && s.UserTLSSecrets() && !equality.Semantic.DeepEqual(o.TLS.Secrets, s.TLS.Secrets) {
		rolled = append(rolled, "spec.tls.secrets") // the pods mount them
	}
	return rolled, warnings
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// validateSecurityUpdate checks what changed of spec.networkPolicy, of spec.auth with spec.recovery
// together, and of spec.tls (validateNetworkPolicy, validateAuthRecovery, validateTLSUpdate).
func validateSecurityUpdate(old, c *etcdv1beta1.EtcdCluster) field.ErrorList {
	o, s := &old.Spec, &c.Spec
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(o.NetworkPolicy, s.NetworkPolicy) {
		errs = append(errs, validateNetworkPolicy(s.NetworkPolicy)...)
	}
	if !equality.Semantic.DeepEqual(o.Recovery, s.Recovery) || !equality.Semantic.DeepEqual(o.Auth, s.Auth) {
		errs = append(errs, validateAuthRecovery(c)...)
	}
	if !equality.Semantic.DeepEqual(o.TLS, s.TLS) {
		errs = append(errs, validateTLSUpdate(old, c)...)
	}
	return errs
}

// ownedLabels are the labels the operator sets on every member pod, over spec.podTemplate.labels:
// the Services, the PodDisruptionBudget and the operator itself select the pods by them.
var ownedLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"}

// ownedPrefix is the prefix of the labels and annotations the operator sets on its pods and reads
// back (cluster, member, spec-hash, initial-cluster-state, awaits-add, peers-addressed, …).
var ownedPrefix = etcdv1beta1.GroupVersion.Group + "/"

// validateOwnedMetadata refuses, in spec.podTemplate (s; o is the stored template, nil on create), a
// label or annotation the operator sets on the member pods itself: the operator's value would
// replace it (labels), or the operator would read the user's value as its own record (an annotation
// such as spec-hash, which decides whether a member is out of date). Only keys added or changed are
// refused, so a template stored before this rule can still be edited otherwise.
func validateOwnedMetadata(o, s *etcdv1beta1.PodTemplate) field.ErrorList {
	if s == nil {
		return nil
	}
	var old etcdv1beta1.PodTemplate
	if o != nil {
		old = *o
	}
	var errs field.ErrorList
	p := specPath.Child("podTemplate")
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if v, had := old.Labels[k]; had && v == s.Labels[k] {
			continue
		}
		if slices.Contains(ownedLabels, k) || strings.HasPrefix(k, ownedPrefix) {
			errs = append(errs, field.Forbidden(p.Child("labels").Key(k), "is set by the operator on every member pod, which the Services, the PodDisruptionBudget and the operator select by: it would be overwritten; use a label key of your own"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Annotations)) {
		if v, had := old.Annotations[k]; had && v == s.Annotations[k] {
			continue
		}
		if strings.HasPrefix(k, ownedPrefix) {
			errs = append(errs, field.Forbidden(p.Child("annotations").Key(k), "is the operator's own record on the member pods (the "+ownedPrefix+" prefix is reserved to it); use an annotation key of your own"))
		}
	}
	return errs
}
