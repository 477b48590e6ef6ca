package deploy_test

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	shipworker "github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

// What the chart promises, asserted on what it renders.

// components are the chart's processes, by the name of their objects.
var components = map[string]string{
	"worker": fullname + "-worker", "serve": fullname + "-serve", "codec-server": fullname + "-codec-server",
	"migrate": fullname + "-migrate", "setup": fullname + "-setup",
}

// chartSecretUsers are the keys of shipnotify's Secret (secrets.existingSecret)
// and the processes that may read each: compose's secretUsers, for the
// chart's processes.
var chartSecretUsers = map[string][]string{
	"sendgrid-api-key":   {"worker"},
	"codec-keys":         {"codec-server", "serve", "worker"},
	"link-key":           {"serve", "worker"},
	"session-key":        {"serve"},
	"id-key":             {"serve"},
	"api-keys":           {"serve"},
	"console-keys":       {"serve"},
	"status-endpoints":   {"serve"},
	"codec-server-token": {"codec-server"},
}

// pods are the rendered workloads' pod specs by component.
func pods(t *testing.T, objs []object) map[string]*corev1.PodSpec {
	t.Helper()
	out := map[string]*corev1.PodSpec{}
	for _, o := range objs {
		if spec := podSpecOf(o); spec != nil {
			comp := strings.TrimPrefix(o.Name, fullname+"-")
			require.Equal(t, components[comp], o.Name, "%s %s is one of the chart's processes", o.Kind, o.Name)
			out[comp] = spec
		}
	}
	return out
}

func envValue(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			require.Nil(t, e.ValueFrom, "%s: %s is a plain value", c.Name, name)
			return e.Value
		}
	}
	t.Fatalf("%s sets no %s", c.Name, name)
	return ""
}

// A deploy never cuts a provider call short: the worker's grace period is
// worker.StopTimeout and a margin, and serve's outlasts a request and its
// drain.
func TestHelmChartGracePeriods(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"-f", productionFile}, {"--set", "worker.terminationMarginSeconds=5", "--set", "serve.requestTimeoutSeconds=65"}} {
		objs := manifests(t, args...)
		worker := find[*appsv1.Deployment](t, objs, "Deployment", components["worker"]).Spec.Template.Spec
		grace := time.Duration(*worker.TerminationGracePeriodSeconds) * time.Second
		require.GreaterOrEqual(t, grace, shipworker.StopTimeout+5*time.Second,
			"the worker's grace period outlasts its stop timeout (%s) by a margin: %s", shipworker.StopTimeout, grace)

		serve := find[*appsv1.Deployment](t, objs, "Deployment", components["serve"]).Spec.Template.Spec
		timeout, err := time.ParseDuration(envValue(t, serve.Containers[0], "SHIPNOTIFY_API_REQUEST_TIMEOUT"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, timeout, budget.MinAPIRequest)
		grace = time.Duration(*serve.TerminationGracePeriodSeconds) * time.Second
		require.Greater(t, grace, timeout+budget.ServeShutdownMargin, "serve's requests in flight finish before SIGKILL")
	}
	// The chart's copies of the Go budgets.
	out, err := render(t, "--show-only", "templates/worker.yaml", "--set", "worker.terminationMarginSeconds=5")
	require.NoError(t, err)
	require.Contains(t, string(out), fmt.Sprintf("terminationGracePeriodSeconds: %d\n", int(shipworker.StopTimeout.Seconds())+5),
		"the chart's worker stop timeout is worker.StopTimeout")
	out, err = render(t, "--show-only", "templates/serve.yaml", "--set", "serve.terminationMarginSeconds=5", "--set", "serve.requestTimeoutSeconds=70")
	require.NoError(t, err)
	require.Contains(t, string(out), fmt.Sprintf("terminationGracePeriodSeconds: %d\n", 70+int(budget.ServeShutdownMargin.Seconds())+5),
		"the chart's serve shutdown margin is budget.ServeShutdownMargin")
}

// Every pod runs as a non-root user on a read-only root filesystem with no
// capabilities and no Kubernetes API token, every container has requests
// and limits, and each long-running process has probes on the endpoints
// it serves.
func TestHelmChartHardensEveryPod(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"-f", productionFile}} {
		all := pods(t, manifests(t, args...))
		require.Contains(t, all, "worker")
		require.Contains(t, all, "serve")
		require.Contains(t, all, "migrate")
		for comp, spec := range all {
			require.False(t, *spec.AutomountServiceAccountToken, "%s mounts no API token", comp)
			psc := spec.SecurityContext
			require.True(t, *psc.RunAsNonRoot, comp)
			require.NotZero(t, *psc.RunAsUser, comp)
			require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, comp)
			for _, c := range spec.Containers {
				sc := c.SecurityContext
				require.NotNil(t, sc, "%s/%s", comp, c.Name)
				require.False(t, *sc.AllowPrivilegeEscalation, "%s/%s", comp, c.Name)
				require.True(t, *sc.ReadOnlyRootFilesystem, "%s/%s", comp, c.Name)
				require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s/%s", comp, c.Name)
				require.Nil(t, sc.Privileged, "%s/%s", comp, c.Name)
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
					require.False(t, req.IsZero(), "%s/%s requests %s", comp, c.Name, r)
					require.False(t, lim.IsZero(), "%s/%s limits %s", comp, c.Name, r)
				}
			}
		}
		for _, comp := range []string{"worker", "serve"} {
			c := all[comp].Containers[0]
			_, port, err := net.SplitHostPort(envValue(t, c, "SHIPNOTIFY_METRICS_ADDR"))
			require.NoError(t, err)
			metrics := containerPort(t, c, "metrics")
			require.Equal(t, port, strconv.Itoa(int(metrics)), "%s: the probes' port is where it serves them", comp)
			require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "%s: liveness is /healthz, never /readyz (a restart fixes no key)", comp)
			require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, comp)
			require.Equal(t, "metrics", c.LivenessProbe.HTTPGet.Port.String(), comp)
			require.Equal(t, "metrics", c.ReadinessProbe.HTTPGet.Port.String(), comp)
		}
		if codec, ok := all["codec-server"]; ok {
			require.Equal(t, "/healthz", codec.Containers[0].LivenessProbe.HTTPGet.Path)
			require.Equal(t, "/healthz", codec.Containers[0].ReadinessProbe.HTTPGet.Path)
		}
	}
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("%s has no port %s", c.Name, name)
	return 0
}

// No secret is a value: the chart renders no Secret, every variable the
// configuration marks secret (and every database URL) comes from a Secret
// by name, every variable is documented, and each key of shipnotify's
// Secret reaches only the processes that use it.
func TestHelmChartRendersNoSecretValues(t *testing.T) {
	t.Parallel()
	vars := map[string]config.Variable{}
	for _, v := range config.Variables {
		vars[v.Name] = v
	}
	for _, args := range [][]string{{"-f", productionFile},
		{"--set", "temporal.apiKey.existingSecret=temporal-cloud", "--set", "codecServer.enabled=true"}} {
		objs := manifests(t, args...)
		require.NotContains(t, kinds(objs), "Secret", "the chart makes no Secret: every one exists already")
		users := map[string][]string{}
		dbURLs := map[string][]string{}
		for comp, spec := range pods(t, objs) {
			for _, c := range spec.Containers {
				for _, e := range c.Env {
					v, ok := vars[e.Name]
					require.True(t, ok, "%s sets %s, which the configuration table does not document", comp, e.Name)
					if v.Secret || v.DatabaseURL {
						require.Empty(t, e.Value, "%s: %s is never a value", comp, e.Name)
						require.NotNil(t, e.ValueFrom, "%s: %s comes from a Secret", comp, e.Name)
						require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: %s comes from a Secret", comp, e.Name)
					}
					if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
						switch ref.SecretKeyRef.Name {
						case "shipnotify":
							users[ref.SecretKeyRef.Key] = append(users[ref.SecretKeyRef.Key], comp)
						case "shipnotify-mirror-runtime", "shipnotify-mirror-owner":
							dbURLs[ref.SecretKeyRef.Name] = append(dbURLs[ref.SecretKeyRef.Name], comp+":"+e.Name)
						}
					}
				}
			}
			for _, vol := range spec.Volumes {
				if vol.Projected == nil {
					continue
				}
				for _, src := range vol.Projected.Sources {
					if src.Secret != nil && src.Secret.Name == "shipnotify" {
						require.NotEmpty(t, src.Secret.Items, "%s mounts chosen keys, never the whole Secret", comp)
						for _, item := range src.Secret.Items {
							users[item.Key] = append(users[item.Key], comp)
						}
					}
				}
			}
		}
		for key, who := range users {
			slices.Sort(who)
			want, ok := chartSecretUsers[key]
			require.True(t, ok, "the chart reads key %s of shipnotify's Secret, which the table does not know", key)
			for _, comp := range who {
				require.Contains(t, want, comp, "%s reads %s", comp, key)
			}
		}
		for _, key := range []string{"sendgrid-api-key", "codec-keys", "link-key", "session-key", "id-key", "api-keys"} {
			require.NotEmpty(t, users[key], "a process reads %s", key)
		}
		slices.Sort(dbURLs["shipnotify-mirror-runtime"])
		require.Equal(t, []string{"serve:DATABASE_URL", "worker:DATABASE_URL"}, dbURLs["shipnotify-mirror-runtime"])
		require.Equal(t, []string{"migrate:SHIPNOTIFY_MIGRATE_DATABASE_URL"}, dbURLs["shipnotify-mirror-owner"],
			"only migrate runs as the owner")
	}
}

// peak is the most mirror connections the fleet can open, as the chart
// counts it from the Go pools: each Deployment one pod over its most
// replicas during a rollout, and migrate beside them.
func peak(workers, maxActivities, serves int) int {
	return (workers+1)*int(cli.WorkerPoolSize(maxActivities)) + (serves+1)*cli.ServePoolSize + cli.MigratePoolSize
}

// The connection budget holds: the chart's pool per worker is the worker's
// own (cli.WorkerPoolSize), and it refuses to render a fleet that could
// open more connections than PostgreSQL leaves, with the figures and what
// to change.
func TestHelmChartEnforcesTheConnectionBudget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode                                      string
		replicas, maxReplicas, activities, serves int
		maxConns, reserved                        int
	}{
		{"none", 2, 4, 10, 2, 100, 5},
		{"none", 2, 4, 11, 2, 100, 5},
		{"none", 1, 4, 200, 1, 100, 5},
		{"none", 3, 3, 200, 2, 1000, 50},
		{"keda", 2, 4, 10, 2, 100, 5},
		{"keda", 3, 10, 50, 3, 800, 50},
		{"keda", 3, 14, 50, 3, 800, 50},
		{"hpa", 1, 6, 20, 2, 250, 10},
	} {
		name := fmt.Sprintf("%+v", c)
		args := []string{"--set", "worker.autoscaling.mode=" + c.mode, "--set", fmt.Sprintf("worker.replicas=%d", c.replicas),
			"--set", fmt.Sprintf("worker.autoscaling.maxReplicas=%d", c.maxReplicas), "--set", fmt.Sprintf("worker.maxActivities=%d", c.activities),
			"--set", fmt.Sprintf("serve.replicas=%d", c.serves), "--set", fmt.Sprintf("mirror.maxConnections=%d", c.maxConns),
			"--set", fmt.Sprintf("mirror.reservedConnections=%d", c.reserved)}
		workers := c.replicas
		if c.mode != "none" {
			workers = c.maxReplicas
		}
		want := peak(workers, c.activities, c.serves)
		out, err := render(t, args...)
		if want > c.maxConns-c.reserved {
			require.Error(t, err, "%s: %d connections do not fit in %d", name, want, c.maxConns-c.reserved)
			require.Contains(t, err.Error(), fmt.Sprintf("could open %d", want), name)
			require.Contains(t, err.Error(), "mirror.maxConnections", name)
			require.Contains(t, err.Error(), "worker.maxActivities", name)
			continue
		}
		require.NoError(t, err, "%s: %d connections fit in %d", name, want, c.maxConns-c.reserved)
		objs := decodeAll(t, out)
		worker := find[*appsv1.Deployment](t, objs, "Deployment", components["worker"])
		require.Equal(t, strconv.Itoa(int(cli.WorkerPoolSize(c.activities))), worker.Annotations["shipnotify.io/mirror-connections"], name)
		require.Equal(t, strconv.Itoa(c.activities), envValue(t, worker.Spec.Template.Spec.Containers[0], "SHIPNOTIFY_WORKER_MAX_ACTIVITIES"), name)
		serve := find[*appsv1.Deployment](t, objs, "Deployment", components["serve"])
		require.Equal(t, strconv.Itoa(cli.ServePoolSize), serve.Annotations["shipnotify.io/mirror-connections"], name)
	}
	// worker.maxActivities 0 derives the slots from the budget: what it
	// leaves the workers, per worker at their most, less the pool's spare,
	// and never above the binary's default.
	for _, c := range []struct {
		mode                          string
		replicas, maxReplicas, serves int
		maxConns, reserved, wantSlots int
	}{
		{"none", 2, 4, 2, 100, 5, 11},
		{"keda", 2, 4, 2, 100, 5, 5},
		{"hpa", 2, 4, 2, 100, 5, 5},
		{"keda", 3, 10, 3, 800, 50, 58},
		{"none", 2, 4, 2, 10000, 5, config.DefaultWorkerMaxActivities},
		{"none", 2, 4, 2, 60, 5, 0},
	} {
		name := fmt.Sprintf("derived %+v", c)
		out, err := render(t, "--set", "worker.autoscaling.mode="+c.mode, "--set", fmt.Sprintf("worker.replicas=%d", c.replicas),
			"--set", fmt.Sprintf("worker.autoscaling.maxReplicas=%d", c.maxReplicas), "--set", "worker.maxActivities=0",
			"--set", fmt.Sprintf("serve.replicas=%d", c.serves), "--set", fmt.Sprintf("mirror.maxConnections=%d", c.maxConns),
			"--set", fmt.Sprintf("mirror.reservedConnections=%d", c.reserved))
		if c.wantSlots == 0 {
			require.ErrorContains(t, err, "leaves the workers no slot", name)
			require.ErrorContains(t, err, "mirror.maxConnections", name)
			continue
		}
		require.NoError(t, err, name)
		workers := c.replicas
		if c.mode != "none" {
			workers = c.maxReplicas
		}
		require.LessOrEqual(t, peak(workers, c.wantSlots, c.serves), c.maxConns-c.reserved, name)
		if c.wantSlots < config.DefaultWorkerMaxActivities {
			require.Greater(t, peak(workers, c.wantSlots+1, c.serves), c.maxConns-c.reserved, "%s: the most that fits", name)
		}
		worker := find[*appsv1.Deployment](t, decodeAll(t, out), "Deployment", components["worker"])
		require.Equal(t, strconv.Itoa(c.wantSlots), envValue(t, worker.Spec.Template.Spec.Containers[0], "SHIPNOTIFY_WORKER_MAX_ACTIVITIES"), name)
		require.Equal(t, strconv.Itoa(int(cli.WorkerPoolSize(c.wantSlots))), worker.Annotations["shipnotify.io/mirror-connections"], name)
	}
}

// Every autoscaling mode the chart documents (its schema's enum) renders on
// the chart's defaults alone: the connection budget derives the slots a
// worker gets, so switching the mode needs no other value.
func TestHelmChartRendersEveryDocumentedMode(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(chartDir + "/values.schema.json")
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			Worker struct {
				Properties struct {
					Autoscaling struct {
						Properties struct {
							Mode struct{ Enum []string }
						}
					}
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &schema))
	modes := schema.Properties.Worker.Properties.Autoscaling.Properties.Mode.Enum
	require.ElementsMatch(t, []string{"none", "hpa", "keda"}, modes)
	values, err := os.ReadFile(chartDir + "/values.yaml")
	require.NoError(t, err)
	for _, mode := range modes {
		require.Contains(t, string(values), mode+":", "values.yaml documents mode %s", mode)
		objs := manifests(t, "--set", "worker.autoscaling.mode="+mode)
		worker := find[*appsv1.Deployment](t, objs, "Deployment", components["worker"])
		slots, err := strconv.Atoi(envValue(t, worker.Spec.Template.Spec.Containers[0], "SHIPNOTIFY_WORKER_MAX_ACTIVITIES"))
		require.NoError(t, err)
		require.Positive(t, slots, mode)
		workers := 2
		if mode != "none" {
			workers = 4
		}
		require.LessOrEqual(t, peak(workers, slots, 2), 100-5, "%s fits PostgreSQL's own max_connections", mode)
	}
}

// Notify slots have one home, the binary's default: the chart's cap on the
// slots it derives is that number.
func TestHelmChartSlotsAreTheBinarysDefault(t *testing.T) {
	t.Parallel()
	objs := manifests(t, "--set", "mirror.maxConnections=100000")
	worker := find[*appsv1.Deployment](t, objs, "Deployment", components["worker"])
	require.Equal(t, strconv.Itoa(config.DefaultWorkerMaxActivities),
		envValue(t, worker.Spec.Template.Spec.Containers[0], "SHIPNOTIFY_WORKER_MAX_ACTIVITIES"),
		"with room to spare, a worker runs the binary's default slots")
	var def string
	for _, v := range config.Variables {
		if v.Name == "SHIPNOTIFY_WORKER_MAX_ACTIVITIES" {
			def = v.Default
		}
	}
	require.Equal(t, strconv.Itoa(config.DefaultWorkerMaxActivities), def)
}

// The defaults render a release someone can use: a fully qualified image
// (an unqualified name means docker.io's library) tagged with the chart's
// appVersion, and a console an approver can log in to, its keys read from
// the Secret the values name.
func TestHelmChartDefaultsAreUsable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	require.NoError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(b, &chart))
	require.NotEmpty(t, chart.AppVersion)
	objs := manifests(t)
	specs := pods(t, objs)
	require.NotEmpty(t, specs)
	for comp, spec := range specs {
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			require.Equal(t, "ghcr.io/shipnotify/shipnotify:"+chart.AppVersion, c.Image, "%s: the image", comp)
			registry, _, _ := strings.Cut(c.Image, "/")
			require.Contains(t, registry, ".", "%s: the image names its registry", comp)
		}
	}

	serve := specs["serve"]
	require.NotNil(t, serve)
	path := envValue(t, serve.Containers[0], "SHIPNOTIFY_CONSOLE_KEYS_FILE")
	mounted := false
	for _, m := range serve.Containers[0].VolumeMounts {
		if !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, vol := range serve.Volumes {
			if vol.Name != m.Name || vol.Projected == nil {
				continue
			}
			for _, src := range vol.Projected.Sources {
				if src.Secret == nil || src.Secret.Name != "shipnotify" {
					continue
				}
				for _, item := range src.Secret.Items {
					if item.Key == "console-keys" && m.MountPath+"/"+item.Path == path {
						mounted = true
					}
				}
			}
		}
	}
	require.True(t, mounted, "serve's console keys file %s is the key console-keys of secrets.existingSecret, mounted", path)
}

// The worker scales on the engine's own signal: KEDA's Temporal scaler on
// the task queue's backlog (with CPU beside it), or an HPA on CPU; never
// both, and a Deployment that autoscales leaves its replicas to them.
func TestHelmChartAutoscalesWorkers(t *testing.T) {
	t.Parallel()
	worker := components["worker"]
	objs := manifests(t)
	require.EqualValues(t, 2, *find[*appsv1.Deployment](t, objs, "Deployment", worker).Spec.Replicas)
	require.False(t, has(objs, "HorizontalPodAutoscaler", worker) || has(objs, "ScaledObject", worker))

	objs = manifests(t, "--set", "worker.autoscaling.mode=hpa", "--set", "mirror.maxConnections=200")
	hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", worker)
	require.Equal(t, worker, hpa.Spec.ScaleTargetRef.Name)
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.EqualValues(t, 2, *hpa.Spec.MinReplicas)
	require.EqualValues(t, 4, hpa.Spec.MaxReplicas)
	require.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
	require.Nil(t, find[*appsv1.Deployment](t, objs, "Deployment", worker).Spec.Replicas, "the HPA owns the replicas")
	require.False(t, has(objs, "ScaledObject", worker))

	objs = manifests(t, "-f", productionFile)
	require.False(t, has(objs, "HorizontalPodAutoscaler", worker), "KEDA makes its own HPA: a second would fight it")
	require.Nil(t, find[*appsv1.Deployment](t, objs, "Deployment", worker).Spec.Replicas)
	so := find[map[string]any](t, objs, "ScaledObject", worker)
	spec := so["spec"].(map[string]any)
	require.Equal(t, worker, spec["scaleTargetRef"].(map[string]any)["name"])
	require.EqualValues(t, 3, spec["minReplicaCount"])
	require.EqualValues(t, 10, spec["maxReplicaCount"])
	var production struct {
		Temporal struct{ Address, Namespace string }
	}
	b, err := os.ReadFile(productionFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &production))
	triggers := spec["triggers"].([]any)
	require.Len(t, triggers, 2)
	temporal := triggers[0].(map[string]any)
	require.Equal(t, "temporal", temporal["type"])
	meta := temporal["metadata"].(map[string]any)
	for k := range meta {
		require.Contains(t, kedaTemporalMetadata, k, "KEDA's Temporal scaler reads no metadata %q", k)
	}
	require.Equal(t, production.Temporal.Address, meta["endpoint"])
	require.Equal(t, production.Temporal.Namespace, meta["namespace"])
	require.Equal(t, workflows.DefaultTaskQueue, meta["taskQueue"], "the queue the workers poll")
	_, err = strconv.Atoi(meta["targetQueueSize"].(string))
	require.NoError(t, err)
	require.Equal(t, "cpu", triggers[1].(map[string]any)["type"])
	// mTLS reaches the scaler through a TriggerAuthentication of the same Secret.
	auth := find[map[string]any](t, objs, "TriggerAuthentication", worker+"-temporal")
	var params []string
	for _, ref := range auth["spec"].(map[string]any)["secretTargetRef"].([]any) {
		r := ref.(map[string]any)
		require.Equal(t, "shipnotify-temporal-client", r["name"])
		params = append(params, r["parameter"].(string))
	}
	require.ElementsMatch(t, []string{"cert", "key", "ca"}, params)
	require.Equal(t, worker+"-temporal", temporal["authenticationRef"].(map[string]any)["name"])
}

// kedaTemporalMetadata are the trigger metadata KEDA 2.21's Temporal scaler
// reads (pkg/scalers/temporal_scaler.go, temporalMetadata): its metadata is
// a map of strings that KEDA's CRD cannot check.
var kedaTemporalMetadata = []string{"endpoint", "endpointFromEnv", "namespace", "activationTargetQueueSize", "targetQueueSize",
	"taskQueue", "queueTypes", "workerDeploymentName", "workerDeploymentBuildId", "includeRunningWorkflowCount",
	"workflowTaskQueueForCount", "minConnectTimeout", "enableTLS", "unsafeSsl", "tlsServerName"}

// The PrometheusRule is deploy/prometheus/alerts.yml, one source: the
// chart's copy is the same file, and the rendered rule holds its groups.
func TestHelmChartAlertRulesAreDeploys(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	copied, err := os.ReadFile(chartDir + "/files/alerts.yml")
	require.NoError(t, err)
	require.Equal(t, string(src), string(copied), "the chart's alerts are deploy/prometheus/alerts.yml: run go generate ./deploy")
	var want monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(src, &want))
	require.NotEmpty(t, want.Groups)
	objs := manifests(t, "-f", productionFile)
	rule := find[*monitoringv1.PrometheusRule](t, objs, "PrometheusRule", fullname)
	require.Equal(t, want, rule.Spec)
}

// Every process is fenced by a NetworkPolicy that lets it reach only what
// it uses; the hooks' policies exist before the hooks run.
func TestHelmChartNetworkPolicies(t *testing.T) {
	t.Parallel()
	objs := manifests(t, "-f", productionFile)
	policies := map[string]*networkingv1.NetworkPolicy{}
	for _, o := range objs {
		if np, ok := o.Obj.(*networkingv1.NetworkPolicy); ok {
			policies[np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"]] = np
		}
	}
	type port struct {
		proto corev1.Protocol
		port  int
	}
	egress := func(np *networkingv1.NetworkPolicy) []port {
		var ps []port
		for _, r := range np.Spec.Egress {
			require.NotEmpty(t, r.Ports, "%s: an egress rule names its ports", np.Name)
			for _, p := range r.Ports {
				ps = append(ps, port{*p.Protocol, p.Port.IntValue()})
			}
		}
		slices.SortFunc(ps, func(a, b port) int { return a.port - b.port })
		return ps
	}
	dns := []port{{corev1.ProtocolUDP, 53}, {corev1.ProtocolTCP, 53}}
	for comp, want := range map[string][]port{
		"worker":       append(slices.Clone(dns), port{"TCP", 443}, port{"TCP", 5432}, port{"TCP", 7233}),
		"serve":        append(slices.Clone(dns), port{"TCP", 443}, port{"TCP", 5432}, port{"TCP", 7233}),
		"codec-server": nil,
		"migrate":      append(slices.Clone(dns), port{"TCP", 5432}),
		"setup":        append(slices.Clone(dns), port{"TCP", 7233}),
	} {
		np := policies[comp]
		require.NotNil(t, np, "a NetworkPolicy fences %s", comp)
		require.ElementsMatch(t, []networkingv1.PolicyType{"Ingress", "Egress"}, np.Spec.PolicyTypes, comp)
		require.ElementsMatch(t, want, egress(np), "%s reaches only these ports", comp)
	}
	// Providers are public addresses: never the cluster's, nor the metadata service.
	for _, comp := range []string{"worker", "serve"} {
		var public *networkingv1.IPBlock
		for _, r := range policies[comp].Spec.Egress {
			for _, peer := range r.To {
				if peer.IPBlock != nil && peer.IPBlock.CIDR == "0.0.0.0/0" {
					public = peer.IPBlock
				}
			}
		}
		require.NotNil(t, public, comp)
		for _, private := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} {
			require.Contains(t, public.Except, private, comp)
		}
	}
	// The workers take no traffic but Prometheus's.
	require.Len(t, policies["worker"].Spec.Ingress, 1)
	require.Equal(t, 9090, policies["worker"].Spec.Ingress[0].Ports[0].Port.IntValue())
	for _, hook := range []string{"migrate", "setup"} {
		np := policies[hook]
		job := find[*batchv1.Job](t, objs, "Job", components[hook])
		require.Equal(t, job.Annotations["helm.sh/hook"], np.Annotations["helm.sh/hook"], "%s's policy is a hook of its own", hook)
		policyWeight, _ := strconv.Atoi(np.Annotations["helm.sh/hook-weight"])
		jobWeight, _ := strconv.Atoi(job.Annotations["helm.sh/hook-weight"])
		require.Less(t, policyWeight, jobWeight, "%s's policy is made before it runs", hook)
	}
}

// migrate runs before install and every upgrade, as the owner, before
// setup; serve's ingress offers only what people, trackers and SendGrid
// reach, over TLS; the ServiceMonitor scrapes both processes, unready
// workers included.
func TestHelmChartHooksIngressAndScrapes(t *testing.T) {
	t.Parallel()
	objs := manifests(t, "-f", productionFile)
	migrate := find[*batchv1.Job](t, objs, "Job", components["migrate"])
	setup := find[*batchv1.Job](t, objs, "Job", components["setup"])
	for _, job := range []*batchv1.Job{migrate, setup} {
		require.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"], job.Name)
	}
	require.Equal(t, []string{"migrate"}, migrate.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, []string{"setup"}, setup.Spec.Template.Spec.Containers[0].Args)
	require.Less(t, migrate.Annotations["helm.sh/hook-weight"], setup.Annotations["helm.sh/hook-weight"])

	ing := find[*networkingv1.Ingress](t, objs, "Ingress", components["serve"])
	require.Len(t, ing.Spec.TLS, 1)
	require.Equal(t, "shipnotify-tls", ing.Spec.TLS[0].SecretName)
	require.Equal(t, []string{ing.Spec.Rules[0].Host}, ing.Spec.TLS[0].Hosts)
	var paths []string
	for _, p := range ing.Spec.Rules[0].HTTP.Paths {
		paths = append(paths, p.Path)
		require.Equal(t, "http", p.Backend.Service.Port.Name, "never the ops port")
	}
	require.ElementsMatch(t, []string{"/v1/", "/console/", "/unsubscribe/", "/providers/sendgrid/events"}, paths)
	_, err := render(t, "--set", "serve.ingress.enabled=true")
	require.ErrorContains(t, err, "serve.ingress.tlsSecretName", "no ingress without TLS")

	sm := find[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor", fullname)
	var scraped []string
	for _, o := range objs {
		svc, ok := o.Obj.(*corev1.Service)
		if !ok {
			continue
		}
		matches := true
		for k, v := range sm.Spec.Selector.MatchLabels {
			matches = matches && svc.Labels[k] == v
		}
		if !matches {
			continue
		}
		scraped = append(scraped, svc.Name)
		require.True(t, svc.Spec.PublishNotReadyAddresses, "%s lists unready pods: they are when metrics matter", svc.Name)
		require.True(t, slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }))
	}
	require.ElementsMatch(t, []string{components["worker"] + "-metrics", components["serve"] + "-metrics"}, scraped)
}

// The chart's rate cap is worker.sendsPerSecond, set as
// SHIPNOTIFY_WORKER_SENDS_PER_SECOND; worker.activitiesPerSecond, its old
// name, is still read, and both set to different caps fails the render
// naming both.
func TestHelmChartRateCapIsSendsPerSecond(t *testing.T) {
	t.Parallel()
	for set, want := range map[string]string{
		"":                             "0",
		"worker.sendsPerSecond=5":      "5",
		"worker.activitiesPerSecond=7": "7",
		"worker.activitiesPerSecond=3,worker.sendsPerSecond=3": "3",
	} {
		var args []string
		if set != "" {
			args = []string{"--set", set}
		}
		worker := find[*appsv1.Deployment](t, manifests(t, args...), "Deployment", components["worker"])
		require.Equal(t, want, envValue(t, worker.Spec.Template.Spec.Containers[0], "SHIPNOTIFY_WORKER_SENDS_PER_SECOND"), set)
	}
	_, err := render(t, "--set", "worker.activitiesPerSecond=7,worker.sendsPerSecond=5")
	require.ErrorContains(t, err, "worker.sendsPerSecond")
	require.ErrorContains(t, err, "worker.activitiesPerSecond")
}

// The tenants' send windows are opt-in: serve.sendWindows.configMap mounts
// the ConfigMap it names into serve alone, read-only and whole (a holidays
// file is read beside the windows file), and points
// SHIPNOTIFY_SEND_WINDOWS_FILE at its key send-windows; a missing ConfigMap
// holds the pod back rather than letting it run without the windows. The
// defaults set no such variable and mount no ConfigMap.
func TestHelmChartMountsSendWindowsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	const variable, dir = "SHIPNOTIFY_SEND_WINDOWS_FILE", "/etc/shipnotify/send-windows"
	hasVariable := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == variable })
	}
	for comp, spec := range pods(t, manifests(t)) {
		for _, c := range spec.Containers {
			require.False(t, hasVariable(c), "%s/%s sets %s by default", comp, c.Name, variable)
			for _, m := range c.VolumeMounts {
				require.NotEqual(t, dir, m.MountPath, "%s/%s mounts send windows by default", comp, c.Name)
			}
		}
		for _, vol := range spec.Volumes {
			require.Nil(t, vol.ConfigMap, "%s mounts the ConfigMap %s by default", comp, vol.Name)
		}
	}

	all := pods(t, manifests(t, "--set", "serve.sendWindows.configMap=shipnotify-send-windows"))
	for comp, spec := range all {
		if comp == "serve" {
			continue
		}
		for _, c := range spec.Containers {
			require.False(t, hasVariable(c), "%s/%s schedules nothing: only serve reads the send windows", comp, c.Name)
		}
	}
	serve := all["serve"]
	require.NotNil(t, serve)
	file := envValue(t, serve.Containers[0], variable)
	require.Equal(t, dir+"/send-windows", file, "the file is the ConfigMap's key send-windows")
	var mount *corev1.VolumeMount
	for i, m := range serve.Containers[0].VolumeMounts {
		if m.MountPath == dir {
			mount = &serve.Containers[0].VolumeMounts[i]
		}
	}
	require.NotNil(t, mount, "serve mounts %s", dir)
	require.True(t, mount.ReadOnly)
	require.Empty(t, mount.SubPath, "the whole directory: the holidays files sit beside the windows file")
	var vol *corev1.Volume
	for i, v := range serve.Volumes {
		if v.Name == mount.Name {
			vol = &serve.Volumes[i]
		}
	}
	require.NotNil(t, vol, "serve has the volume %s it mounts", mount.Name)
	require.NotNil(t, vol.ConfigMap, "the send windows are a ConfigMap: they hold no secret")
	require.Equal(t, "shipnotify-send-windows", vol.ConfigMap.Name)
	require.Empty(t, vol.ConfigMap.Items, "every key, so every .ics file the windows file names")
	require.False(t, vol.ConfigMap.Optional != nil && *vol.ConfigMap.Optional, "a missing ConfigMap holds serve back")
}
