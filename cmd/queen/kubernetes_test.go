package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/gen/routes"
)

// The Kubernetes example in docs/kubernetes is checked here, where the
// broker's configuration is. kubeconform installs but cannot fetch its
// schemas on this machine, and the Kubernetes API's Go types would move
// dependencies the broker uses; so each document is decoded strictly
// (an unknown or misspelt field fails) into the part of the API schema
// the example uses (k8s_types_test.go), required fields are checked, and
// the result is held against the broker: its environment must pass
// config.Load, the probes must reach /health (a public route) on the port
// the broker listens on, the spool must be on the per-pod volume, and the
// grace period must cover preStop and the drain.
func TestKubernetesExample(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "kubernetes", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	var (
		sts      *k8sStatefulSet
		cms      = map[string]*k8sConfigMap{}
		services []*k8sService
		pdbs     []*k8sPDB
		policies []*k8sNetworkPolicy
	)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range splitYAML(raw) {
			var meta struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &meta), "%s #%d", f, i)
			var named struct {
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &named))
			require.NotEmpty(t, named.Metadata.Name, "%s #%d: metadata.name", f, i)
			where := filepath.Base(f) + " " + meta.Kind
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 StatefulSet":
				require.Nil(t, sts, "one StatefulSet")
				sts = strict[k8sStatefulSet](t, doc, where)
			case "v1 ConfigMap":
				cm := strict[k8sConfigMap](t, doc, where)
				cms[cm.Metadata.Name] = cm
			case "v1 Service":
				services = append(services, strict[k8sService](t, doc, where))
			case "policy/v1 PodDisruptionBudget":
				pdbs = append(pdbs, strict[k8sPDB](t, doc, where))
			case "networking.k8s.io/v1 NetworkPolicy":
				policies = append(policies, strict[k8sNetworkPolicy](t, doc, where))
			default:
				t.Fatalf("%s: unexpected %s %s", f, meta.APIVersion, meta.Kind)
			}
		}
	}
	require.NotNil(t, sts)
	require.Len(t, pdbs, 1)

	pod := sts.Spec.Template
	require.NotEmpty(t, pod.Metadata.Labels)
	require.Equal(t, sts.Spec.Selector.MatchLabels, pod.Metadata.Labels, "the selector picks the pods")
	require.GreaterOrEqual(t, sts.Spec.Replicas, 2)
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	require.NotEmpty(t, c.Name)
	require.NotEmpty(t, c.Image)

	// The broker's environment as the pod gets it.
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		cm, ok := cms[from.ConfigMapRef.Name]
		require.True(t, ok, "ConfigMap %s is in the example", from.ConfigMapRef.Name)
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.SecretKeyRef != nil:
			require.NotEmpty(t, e.ValueFrom.SecretKeyRef.Name, e.Name)
			require.NotEmpty(t, e.ValueFrom.SecretKeyRef.Key, e.Name)
			env[e.Name] = "from-a-secret-" + strings.Repeat("x", 32)
			continue
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = sts.Metadata.Name + "-0"
			continue
		default:
			t.Fatalf("env %s: valueFrom is a secretKeyRef or the pod's name", e.Name)
		}
		env[e.Name] = e.Value
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err, "the example's environment")
	require.Greater(t, len(cfg.Postgres.Hosts), 1, "the example lists every PostgreSQL node")

	// The mesh (docs/mesh.md): authenticated, one stable id per pod, and
	// every pod of the StatefulSet by its stable name, itself included.
	require.True(t, cfg.Mesh.Active(), "the example runs the mesh")
	require.Equal(t, "hmac", cfg.Mesh.Auth())
	require.Equal(t, sts.Metadata.Name+"-0", cfg.Mesh.ServerID)
	var wantPeers []string
	for i := range sts.Spec.Replicas {
		wantPeers = append(wantPeers, fmt.Sprintf("%s-%d.%s:%d", sts.Metadata.Name, i, sts.Spec.ServiceName, cfg.Mesh.Port))
	}
	require.Equal(t, wantPeers, cfg.Mesh.Peers)

	// Probes: /health, public, on the broker's port.
	route, ok := routes.Match("GET", "/health")
	require.True(t, ok)
	require.Equal(t, routes.Public, route.Access, "probes carry no token")
	port := func(ref string) int {
		if n, err := strconv.Atoi(ref); err == nil {
			return n
		}
		for _, p := range c.Ports {
			if p.Name == ref {
				return p.ContainerPort
			}
		}
		t.Fatalf("container has no port %q", ref)
		return 0
	}
	require.Equal(t, cfg.Server.Port, port("http"), "containerPort is the broker's PORT")
	require.Equal(t, cfg.Mesh.Port, port("mesh"), "containerPort mesh is QUEEN_MESH_PORT")
	for name, probe := range map[string]*k8sProbe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe} {
		require.NotNil(t, probe, name)
		require.NotNil(t, probe.HTTPGet, name)
		require.Equal(t, "/health", probe.HTTPGet.Path, name)
		require.Equal(t, cfg.Server.Port, port(string(probe.HTTPGet.Port)), name)
	}
	// Liveness must not fail on a database outage, which /health reports.
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.LivenessProbe.TCPSocket, "liveness checks the listener, not /health")
	require.Equal(t, cfg.Server.Port, port(string(c.LivenessProbe.TCPSocket.Port)))
	// Readiness rides out a failover of the measured length.
	r := c.ReadinessProbe
	require.GreaterOrEqual(t, time.Duration(r.PeriodSeconds*r.FailureThreshold)*time.Second, 20*time.Second)

	// preStop, then the drain, within the grace period.
	require.Positive(t, c.Lifecycle.PreStop.Sleep.Seconds)
	grace := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	require.Greater(t, grace, preStop+cfg.Server.ShutdownTimeout)

	// The spool is on the pod's own claim, which outlives the pod.
	require.True(t, cfg.Spool.Enabled())
	var claims []string
	for _, vc := range sts.Spec.VolumeClaimTemplates {
		require.NotEmpty(t, vc.Spec.Resources.Requests["storage"], vc.Metadata.Name)
		claims = append(claims, vc.Metadata.Name)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == cfg.Spool.Dir {
			require.Contains(t, claims, m.Name, "FILE_BUFFER_DIR is on a volumeClaimTemplate")
			mounted = true
		}
	}
	require.True(t, mounted, "FILE_BUFFER_DIR %s is mounted", cfg.Spool.Dir)

	// The Services and the budget select the broker's pods; the
	// StatefulSet's service is headless.
	headless := false
	for _, svc := range services {
		require.Equal(t, pod.Metadata.Labels, svc.Spec.Selector, svc.Metadata.Name)
		require.NotEmpty(t, svc.Spec.Ports, svc.Metadata.Name)
		for _, p := range svc.Spec.Ports {
			require.Equal(t, cfg.Server.Port, port(string(p.TargetPort)), svc.Metadata.Name)
		}
		if svc.Metadata.Name == sts.Spec.ServiceName {
			headless = svc.Spec.ClusterIP == "None"
		}
	}
	require.True(t, headless, "serviceName %s is a headless Service of the example", sts.Spec.ServiceName)
	require.Equal(t, pod.Metadata.Labels, pdbs[0].Spec.Selector.MatchLabels)

	// The mesh port is reachable from the broker pods only: some policy
	// selecting them admits it from them, and no rule admits it (or every
	// port) from anywhere else.
	meshFromBrokers := false
	for _, np := range policies {
		if !maps.Equal(np.Spec.PodSelector.MatchLabels, pod.Metadata.Labels) {
			continue
		}
		require.Contains(t, np.Spec.PolicyTypes, "Ingress", np.Metadata.Name)
		for _, rule := range np.Spec.Ingress {
			opensMesh := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				opensMesh = opensMesh || port(string(p.Port)) == cfg.Mesh.Port
			}
			if !opensMesh {
				continue
			}
			require.NotEmpty(t, rule.From, "%s: a rule opens the mesh port to everyone", np.Metadata.Name)
			for _, from := range rule.From {
				require.NotNil(t, from.PodSelector, np.Metadata.Name)
				require.Equal(t, pod.Metadata.Labels, from.PodSelector.MatchLabels, "%s: the mesh port admits the broker pods only", np.Metadata.Name)
			}
			meshFromBrokers = true
		}
	}
	require.True(t, meshFromBrokers, "a NetworkPolicy admits the mesh port from the broker pods")
	require.True(t, (pdbs[0].Spec.MaxUnavailable == "") != (pdbs[0].Spec.MinAvailable == ""), "one of maxUnavailable, minAvailable")
}

// strict decodes one document, refusing unknown fields.
func strict[T any](t *testing.T, doc []byte, where string) *T {
	t.Helper()
	var v T
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&v), where)
	return &v
}

// splitYAML cuts a file at its "---" lines and drops empty documents.
func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(raw, []byte("\n---\n")) {
		lines := slices.DeleteFunc(strings.Split(string(d), "\n"), func(l string) bool {
			l = strings.TrimSpace(l)
			return l == "" || strings.HasPrefix(l, "#") || l == "---"
		})
		if len(lines) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}
