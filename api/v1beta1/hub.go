package v1beta1

// Hub marks EtcdCluster v1beta1 as the version every other version of the kind converts to and from
// (controller-runtime's conversion.Hub): v1alpha1 converts through it.
func (*EtcdCluster) Hub() {}

// Hub marks EtcdBackup v1beta1 as the version every other version of the kind converts to and from.
func (*EtcdBackup) Hub() {}
