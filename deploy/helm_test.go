package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// The chart's tests render deploy/helm/shipnotify with the pinned Helm and
// read every object back through the Kubernetes API's own Go types,
// strictly: a field the API does not have, a duplicate key or a value of
// the wrong type fails, as `kubectl apply --validate=strict` would. KEDA's
// kinds are checked against KEDA's CRD schemas (testdata/crds), the
// Prometheus Operator's through its Go types.

const (
	chartDir        = "helm/shipnotify"
	productionFile  = "helm/values-production.yaml"
	release         = "rel"
	releaseSpace    = "ship"
	fullname        = release + "-shipnotify"
	helmBinVariable = "SHIPNOTIFY_DEV_HELM_BIN"
)

// helmBin is the pinned Helm (scripts/dev.sh install-deploy installs it): CI must
// have it; a developer without it skips.
func helmBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(helmBinVariable); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("helm"); err == nil {
		return bin
	}
	testenv.Missing(t, "helm is not installed; scripts/dev.sh install-deploy (run by make test) installs the pinned one")
	return ""
}

// helm runs the pinned Helm with args and returns its output; err carries
// what it printed on failure.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// render is `helm template` of the chart with args (-f FILE, --set K=V).
func render(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return helm(t, append([]string{"template", release, chartDir, "--namespace", releaseSpace}, args...)...)
}

// object is one rendered manifest, decoded into its API type (KEDA's:
// a map checked against its CRD's schema).
type object struct {
	Kind, Name string
	Obj        any
	Meta       metav1.ObjectMeta
}

// manifests renders the chart with args and decodes every document.
func manifests(t *testing.T, args ...string) []object {
	t.Helper()
	out, err := render(t, args...)
	require.NoError(t, err)
	return decodeAll(t, out)
}

var (
	scheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{
			corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
			networkingv1.AddToScheme, autoscalingv2.AddToScheme, monitoringv1.AddToScheme,
		} {
			if err := add(s); err != nil {
				panic(err)
			}
		}
		return s
	}()
	strict = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
)

// decodeAll splits a render into documents and decodes each strictly.
func decodeAll(t *testing.T, rendered []byte) []object {
	t.Helper()
	var objs []object
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		require.NoError(t, err, "a document is YAML without duplicate keys:\n%s", doc)
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(js, &head))
		o := object{Kind: head.Kind, Name: head.Metadata.Name, Meta: head.Metadata}
		if strings.HasPrefix(head.APIVersion, "keda.sh/") {
			o.Obj = validateKEDA(t, head.Kind, js)
		} else {
			obj, gvk, err := strict.Decode(js, nil, nil)
			require.NoError(t, err, "%s %s is a valid %s", head.Kind, head.Metadata.Name, head.APIVersion)
			require.Equal(t, head.Kind, gvk.Kind)
			o.Obj = obj
		}
		checkNames(t, o)
		objs = append(objs, o)
	}
	require.NotEmpty(t, objs)
	return objs
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// checkNames applies the API server's rules for names and labels, which
// a strict decode does not check.
func checkNames(t *testing.T, o object) {
	t.Helper()
	nameRule := validation.IsDNS1123Subdomain
	if o.Kind == "Service" {
		nameRule = validation.IsDNS1035Label
	}
	require.Empty(t, nameRule(o.Name), "%s name %q", o.Kind, o.Name)
	require.Empty(t, metav1validation.ValidateLabels(o.Meta.Labels, field.NewPath("metadata", "labels")), "%s %s labels", o.Kind, o.Name)
	if spec := podSpecOf(o); spec != nil {
		for _, c := range spec.Containers {
			for _, p := range c.Ports {
				require.Empty(t, validation.IsValidPortName(p.Name), "%s %s port %q", o.Kind, o.Name, p.Name)
			}
			for _, e := range c.Env {
				require.Empty(t, validation.IsEnvVarName(e.Name), "%s %s env %q", o.Kind, o.Name, e.Name)
			}
		}
	}
}

// crdSchemas are KEDA's CRD schemas, made strict, by kind.
var crdSchemas = map[string]string{
	"ScaledObject":          "testdata/crds/keda.sh_scaledobjects.yaml",
	"TriggerAuthentication": "testdata/crds/keda.sh_triggerauthentications.yaml",
}

// validateKEDA checks a KEDA object against its CRD's openAPIV3Schema and
// returns it as a map.
func validateKEDA(t *testing.T, kind string, js []byte) map[string]any {
	t.Helper()
	file, ok := crdSchemas[kind]
	require.True(t, ok, "the chart renders KEDA kind %s, whose CRD schema testdata/crds lacks", kind)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Names    struct{ Kind string } `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &crd))
	require.Equal(t, kind, crd.Spec.Names.Kind)
	var schema map[string]any
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	require.NotNil(t, schema, "%s: v1alpha1", file)
	// metadata is the API server's to check: ObjectMeta, strictly.
	schema["properties"].(map[string]any)["metadata"] = map[string]any{"type": "object"}
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(file, closed(schema)))
	sch, err := c.Compile(file)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(js, &doc))
	require.NoError(t, sch.Validate(doc), "%s is valid against KEDA's CRD", kind)
	meta, err := json.Marshal(doc["metadata"])
	require.NoError(t, err)
	var om metav1.ObjectMeta
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&om), "%s metadata", kind)
	return doc
}

// closed makes an OpenAPI schema refuse fields it does not name, except
// where it keeps unknown fields on purpose.
func closed(s map[string]any) map[string]any {
	for k, v := range s {
		switch v := v.(type) {
		case map[string]any:
			s[k] = closed(v)
		case []any:
			for i, e := range v {
				if m, ok := e.(map[string]any); ok {
					v[i] = closed(m)
				}
			}
		}
	}
	if _, ok := s["properties"]; ok && s["x-kubernetes-preserve-unknown-fields"] != true {
		if _, set := s["additionalProperties"]; !set {
			s["additionalProperties"] = false
		}
	}
	return s
}

// podSpecOf is the pod template of a workload, nil for other kinds.
func podSpecOf(o object) *corev1.PodSpec {
	switch w := o.Obj.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template.Spec
	case *batchv1.Job:
		return &w.Spec.Template.Spec
	}
	return nil
}

func kinds(objs []object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind]++
	}
	return n
}

// find is the object of kind and name; it must be there.
func find[T any](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			v, ok := o.Obj.(T)
			require.True(t, ok, "%s %s has type %T", kind, name, o.Obj)
			return v
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	var zero T
	return zero
}

func has(objs []object, kind, name string) bool {
	return slices.ContainsFunc(objs, func(o object) bool { return o.Kind == kind && o.Name == name })
}

// The chart lints clean, with its defaults and with the production
// example.
func TestHelmChartLints(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"-f", productionFile}} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "0 chart(s) failed")
	}
}

// Every object the chart renders, with its defaults, with the production
// example, with each autoscaling mode and Temporal credential and with the
// tenants' send windows, is a
// valid object of its API type, and the set is what the chart promises.
func TestHelmChartRendersValidObjects(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		args  []string
		kinds map[string]int
	}{
		"defaults": {nil, map[string]int{"Deployment": 2, "Job": 2, "Service": 3, "PodDisruptionBudget": 2,
			"NetworkPolicy": 4, "ServiceAccount": 1}},
		"production": {[]string{"-f", productionFile}, map[string]int{"Deployment": 3, "Job": 2, "Service": 4,
			"PodDisruptionBudget": 2, "NetworkPolicy": 5, "ServiceAccount": 1, "Ingress": 1, "ScaledObject": 1,
			"TriggerAuthentication": 1, "ServiceMonitor": 1, "PrometheusRule": 1}},
		"hpa": {[]string{"--set", "worker.autoscaling.mode=hpa"},
			map[string]int{"Deployment": 2, "Job": 2, "Service": 3, "PodDisruptionBudget": 2, "NetworkPolicy": 4,
				"ServiceAccount": 1, "HorizontalPodAutoscaler": 1}},
		"keda": {[]string{"--set", "worker.autoscaling.mode=keda"},
			map[string]int{"Deployment": 2, "Job": 2, "Service": 3, "PodDisruptionBudget": 2, "NetworkPolicy": 4,
				"ServiceAccount": 1, "ScaledObject": 1}},
		"send windows": {[]string{"--set", "serve.sendWindows.configMap=shipnotify-send-windows"},
			map[string]int{"Deployment": 2, "Job": 2, "Service": 3, "PodDisruptionBudget": 2, "NetworkPolicy": 4,
				"ServiceAccount": 1}},
		"keda with an API key, no setup, no policies": {[]string{"--set", "worker.autoscaling.mode=keda",
			"--set", "temporal.apiKey.existingSecret=temporal-cloud", "--set", "temporal.setup.enabled=false",
			"--set", "networkPolicy.enabled=false", "--set", "serviceAccount.create=false"},
			map[string]int{"Deployment": 2, "Job": 1, "Service": 3, "PodDisruptionBudget": 2, "ScaledObject": 1,
				"TriggerAuthentication": 1}},
	} {
		objs := manifests(t, c.args...)
		require.Equal(t, c.kinds, kinds(objs), name)
	}
}

// Values the chart cannot use are refused by its schema, naming the field,
// before anything renders.
func TestHelmChartRefusesBadValues(t *testing.T) {
	t.Parallel()
	for set, field := range map[string]string{
		"worker.autoscaling.mode=sometimes": "/worker/autoscaling/mode",
		"worker.maxActivities=-1":           "/worker/maxActivities",
		"serve.requestTimeoutSeconds=30":    "/serve/requestTimeoutSeconds",
		"temporal.address=temporal":         "/temporal/address",
		"config.sendgridBaseURL=http://x":   "/config/sendgridBaseURL",
		"worker.terminationMarginSeconds=1": "/worker/terminationMarginSeconds",
		"mirror.runtime.existingSecret=":    "/mirror/runtime/existingSecret",
		"workers.replicas=3":                "workers",
		"serve.sendWindows.configMap=Bad_":  "/serve/sendWindows/configMap",
	} {
		_, err := render(t, "--set", set)
		require.ErrorContains(t, err, field, set)
	}
}
