package ctrlscope

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope/internal/benchcpu"
)

// The cost of provenance and detection (v1.7), per controller event and per reconcile: the same
// calls with detection on (the default) and off (TelemetryOptions.NoDetect, a 1.6 publisher's
// records), so the difference is what provenance.go, diff.go/typeddiff.go and findings.go add.
// The frames are built (not sent) every MaxFrameRecords records, as in BenchmarkReconcileTelemetry.
//
//	go test ./ctrlscope -run '^$' -bench 'Provenance' -benchmem
//
// On unix each result also says cpu-ns/op (ReportCPU): the process's CPU time per iteration.

func benchTelemetry(b *testing.B, detect bool) (*Publisher, *Telemetry) {
	b.Helper()
	pub, err := NewPublisher("redis://127.0.0.1:1/0", PublisherOptions{Name: "bench", BufferLimit: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return pub, NewTelemetry(pub, "bench", TelemetryOptions{NoDetect: !detect})
}

func toUnstructured(b *testing.B, obj any) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		b.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func detectName(detect bool) string {
	if detect {
		return "detect=on"
	}
	return "detect=off"
}

// deployment is a typical Deployment as controller-runtime's cache hands it to a handler: labels,
// a pod template with one container, managedFields of two managers, a status with conditions.
func deployment(name string, rv int, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name, "tier": "web"}
	now := metav1.NewTime(time.UnixMilli(1_700_000_000_000))
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-1", ResourceVersion: strconv.Itoa(rv), Generation: 3,
			UID: "6b1d3c9e-7d4f-4a8e-9b9e-1f2a3b4c5d6e", Labels: labels, CreationTimestamp: now,
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", Time: &now,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
					Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}}}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: replicas, ReadyReplicas: replicas,
			AvailableReplicas: replicas, UpdatedReplicas: replicas,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: now,
					LastTransitionTime: now, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}}},
	}
}

// BenchmarkProvenanceEvent: one controller event, an update of a typed Deployment (its status
// changed: the diff walks both objects) mapped to its own key, as ctrlruntime's handler publishes
// it. With detection on it also gets rv/old_rv/diff/self and leaves a trigger; one reconcile_start
// per 20 events takes them, so pending lists stay at the protocol's bound.
//
// detect=on,unstructured: the same objects as *unstructured.Unstructured (a dynamic client's or
// controller-runtime's unstructured watches), whose diff walks maps instead of structs.
func BenchmarkProvenanceEvent(b *testing.B) {
	cases := []struct {
		name                 string
		detect, unstructured bool
	}{{"detect=off", false, false}, {"detect=on", true, false}, {"detect=on,unstructured", true, true}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			pub, tel := benchTelemetry(b, c.detect)
			ct := tel.ControllerTopic("c")
			const keys = 1000
			olds, news, names := make([]any, keys), make([]any, keys), make([]string, keys)
			for i := range olds {
				name := fmt.Sprintf("web-%04d", i)
				olds[i], news[i], names[i] = deployment(name, 2*i+1, 2), deployment(name, 2*i+2, 3), "team-1/"+name
				if c.unstructured {
					olds[i], news[i] = toUnstructured(b, olds[i]), toUnstructured(b, news[i])
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			defer benchcpu.ReportCPU(b)()
			for i := 0; i < b.N; i++ {
				k := (i / 20) % keys // 20 events of a key, then its attempt
				ct.Event(EventCall{Event: ControllerEventUpdate, Key: names[k], Requests: names[k : k+1],
					Source: "controller/c (For)", Old: olds[k], New: news[k]})
				if i%20 == 19 {
					ct.ReconcileStart(ctx, names[k], 0)
				}
				if pub.n >= pub.opts.MaxFrameRecords {
					pub.build(1)
				}
			}
		})
	}
}

// BenchmarkProvenanceReconcile: one reconcile as controller-runtime's loop reports it (queue add,
// get, reconcile start and end, forget, done), distinct keys, the attempt's one trigger taken (the
// event that caused it is not counted here) and the key's findings state kept, against the same
// calls without detection. Every 10th key fails once first (a retry trigger, the failing streak,
// the rate limiter's delay).
func BenchmarkProvenanceReconcile(b *testing.B) {
	for _, detect := range []bool{false, true} {
		b.Run(detectName(detect), func(b *testing.B) {
			pub, tel := benchTelemetry(b, detect)
			qt, ct := tel.QueueTopic("c"), tel.ControllerTopic("c")
			keys := make([]string, 100_000)
			for i := range keys {
				keys[i] = fmt.Sprintf("team-%d/web-%07d", i%20, i)
			}
			zero, w, delay := 0, 0.001, 0.005
			ctx := context.Background()
			attempt := func(key string, result ReconcileResult) {
				qt.Record(QueueRecord{Op: QueueOpGet, Key: key, Depth: 0, Duration: &w})
				ct.ReconcileStart(ctx, key, 0)
				ct.ReconcileEnd(key, 0, time.Microsecond, result, 0, "")
			}
			b.ReportAllocs()
			b.ResetTimer()
			defer benchcpu.ReportCPU(b)()
			for i := 0; i < b.N; i++ {
				key := keys[i%len(keys)]
				qt.RecordAdd(key, 1)
				if i%10 == 0 {
					attempt(key, ReconcileResultError)
					qt.Record(QueueRecord{Op: QueueOpAddRateLimited, Key: key, Depth: 0, Delay: &delay})
					qt.Record(QueueRecord{Op: QueueOpDone, Key: key, Depth: 1, Duration: &w})
				}
				attempt(key, ReconcileResultSuccess)
				qt.Record(QueueRecord{Op: QueueOpForget, Key: key, Depth: 0, Requeues: &zero})
				qt.Record(QueueRecord{Op: QueueOpDone, Key: key, Depth: 0, Duration: &w})
				if pub.n >= pub.opts.MaxFrameRecords {
					pub.build(1)
				}
			}
		})
	}
}
