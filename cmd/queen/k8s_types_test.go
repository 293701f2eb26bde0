package main

import "go.yaml.in/yaml/v3"

// The part of the Kubernetes API schema (core/v1, apps/v1, policy/v1,
// networking.k8s.io/v1) the
// example in docs/kubernetes uses, with the API's field names and types,
// for TestKubernetesExample's strict decoding. A field the example starts
// to use must be added here, from the API reference, for the test to pass.

type k8sMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

// k8sIntOrString is an IntOrString: a port number or a port name.
type k8sIntOrString string

func (s *k8sIntOrString) UnmarshalYAML(n *yaml.Node) error {
	*s = k8sIntOrString(n.Value)
	return nil
}

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type k8sConfigMap struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   k8sMeta           `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
}

type k8sService struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string         `yaml:"name"`
			Port       int            `yaml:"port"`
			TargetPort k8sIntOrString `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPDB struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		MaxUnavailable k8sIntOrString `yaml:"maxUnavailable"`
		MinAvailable   k8sIntOrString `yaml:"minAvailable"`
		Selector       k8sSelector    `yaml:"selector"`
	} `yaml:"spec"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string         `yaml:"path"`
		Port k8sIntOrString `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port k8sIntOrString `yaml:"port"`
	} `yaml:"tcpSocket"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type k8sResources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type k8sContainer struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources    k8sResources `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sStatefulSet struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		ServiceName         string      `yaml:"serviceName"`
		Replicas            int         `yaml:"replicas"`
		PodManagementPolicy string      `yaml:"podManagementPolicy"`
		Selector            k8sSelector `yaml:"selector"`
		UpdateStrategy      struct {
			Type string `yaml:"type"`
		} `yaml:"updateStrategy"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
					RunAsGroup   int  `yaml:"runAsGroup"`
					FSGroup      int  `yaml:"fsGroup"`
				} `yaml:"securityContext"`
				TopologySpreadConstraints []struct {
					MaxSkew           int         `yaml:"maxSkew"`
					TopologyKey       string      `yaml:"topologyKey"`
					WhenUnsatisfiable string      `yaml:"whenUnsatisfiable"`
					LabelSelector     k8sSelector `yaml:"labelSelector"`
				} `yaml:"topologySpreadConstraints"`
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				AccessModes []string     `yaml:"accessModes"`
				Resources   k8sResources `yaml:"resources"`
			} `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sNetworkPolicy struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
	Spec       struct {
		PodSelector k8sSelector `yaml:"podSelector"`
		PolicyTypes []string    `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				PodSelector *k8sSelector `yaml:"podSelector"`
			} `yaml:"from"`
			Ports []struct {
				Protocol string         `yaml:"protocol"`
				Port     k8sIntOrString `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	} `yaml:"spec"`
}
