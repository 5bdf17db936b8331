package validate

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScaledObject is KEDA's keda.sh/v1alpha1 ScaledObject as KEDA v2.18.0 defines it
// (apis/keda/v1alpha1/scaledobject_types.go and scaletriggers_types.go of
// github.com/kedacore/keda/v2, the fields and JSON names of its CRD keda.sh_scaledobjects.yaml),
// written out here because that package does not build beside k8s.io/api v0.37: its webhooks
// need controller-runtime v0.22 or older, which does not build with client-go v0.36 or newer.
// A manifest carries no status, so Status is left out (and refused).
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is KEDA's ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget     `json:"scaleTargetRef"`
	PollingInterval       *int32           `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32           `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32           `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32           `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32           `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32           `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig  `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers  `json:"triggers"`
	Fallback              *ScalingFallback `json:"fallback,omitempty"`
}

// ScalingFallback is KEDA's Fallback.
type ScalingFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// AdvancedConfig is KEDA's AdvancedConfig.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *ScalingModifiers              `json:"scalingModifiers,omitempty"`
}

// ScalingModifiers is KEDA's ScalingModifiers.
type ScalingModifiers struct {
	Formula          string                         `json:"formula,omitempty"`
	Target           string                         `json:"target,omitempty"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// HorizontalPodAutoscalerConfig is KEDA's HorizontalPodAutoscalerConfig; Behavior is the real
// autoscaling/v2 type.
type HorizontalPodAutoscalerConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

// ScaleTarget is KEDA's ScaleTarget.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// ScaleTriggers is KEDA's ScaleTriggers.
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef is KEDA's AuthenticationRef.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// PrometheusTriggerMetadata lists the metadata keys KEDA v2.18.0's prometheus scaler reads
// (pkg/scalers/prometheus_scaler.go, pkg/scalers/authentication), with whether each is required.
var PrometheusTriggerMetadata = map[string]bool{
	"serverAddress":       true,
	"query":               true,
	"threshold":           true,
	"activationThreshold": false,
	"queryParameters":     false,
	"namespace":           false,
	"customHeaders":       false,
	"ignoreNullValues":    false,
	"unsafeSsl":           false,
	"awsRegion":           false,
	"timeout":             false,
	"authModes":           false,
	"apiKey":              false,
	"method":              false,
	"keyParamName":        false,
}
