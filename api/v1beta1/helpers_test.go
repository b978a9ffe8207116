package v1beta1_test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var corev1EmptyDir = corev1.EmptyDirVolumeSource{}

func unstructuredFrom(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}
