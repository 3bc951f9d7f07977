package clientgo

// DescribeRateLimiter reads a client-go rate limiter's parameters for the dashboard (protocol v1.5,
// RateLimiterSpec). client-go's limiters keep them in unexported fields (baseDelay, maxDelay,
// limiters, ...) and offer no accessor, so they are read by reflection, which may read (never
// write) unexported fields. A limiter of another type, or one whose fields a future client-go
// renamed, is described as "other", named by its type: the dashboard then shows the delays the
// queue published without saying which part chose them.

import (
	"math"
	"reflect"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
)

var workqueuePkg = reflect.TypeOf(workqueue.TypedBucketRateLimiter[string]{}).PkgPath()

// DescribeRateLimiter describes limiter (an ObserveRateLimiter wrapper is seen through).
func DescribeRateLimiter[T comparable](limiter workqueue.TypedRateLimiter[T]) ctrlscope.RateLimiterSpec {
	if r, ok := limiter.(*RateLimiter[T]); ok {
		limiter = r.inner
	}
	return describeValue(reflect.ValueOf(limiter))
}

func describeValue(v reflect.Value) ctrlscope.RateLimiterSpec {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ctrlscope.OtherSpec("nil")
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return ctrlscope.OtherSpec("nil")
	}
	if spec, ok := describeClientGo(v); ok {
		return spec
	}
	return ctrlscope.OtherSpec(v.Type().String())
}

// describeClientGo describes one of client-go's own limiters; false for anything else.
func describeClientGo(v reflect.Value) (ctrlscope.RateLimiterSpec, bool) {
	t := v.Type()
	if v.Kind() != reflect.Struct || t.PkgPath() != workqueuePkg {
		return nil, false
	}
	name, _, _ := strings.Cut(t.Name(), "[") // generic types are named with their type arguments
	switch name {
	case "TypedItemExponentialFailureRateLimiter":
		base, ok1 := durationField(v, "baseDelay")
		max, ok2 := durationField(v, "maxDelay")
		return ctrlscope.ExponentialSpec(base, max), ok1 && ok2
	case "TypedItemFastSlowRateLimiter":
		fast, ok1 := durationField(v, "fastDelay")
		slow, ok2 := durationField(v, "slowDelay")
		attempts, ok3 := intField(v, "maxFastAttempts")
		return ctrlscope.FastSlowSpec(fast, slow, int(attempts)), ok1 && ok2 && ok3
	case "TypedBucketRateLimiter":
		lim := v.FieldByName("Limiter")
		if !lim.IsValid() || lim.Kind() != reflect.Pointer || lim.IsNil() {
			return nil, false
		}
		lim = lim.Elem()
		limit := lim.FieldByName("limit")
		burst, ok := intField(lim, "burst")
		if !ok || !limit.IsValid() || limit.Kind() != reflect.Float64 || limit.Float() >= math.MaxFloat64 {
			return nil, false // an unlimited bucket (rate.Inf, the largest float) never delays: "other"
		}
		return ctrlscope.BucketSpec(limit.Float(), int(burst)), true
	case "TypedMaxOfRateLimiter":
		ls := v.FieldByName("limiters")
		if !ls.IsValid() || ls.Kind() != reflect.Slice {
			return nil, false
		}
		of := make([]ctrlscope.RateLimiterSpec, 0, ls.Len())
		for i := range ls.Len() {
			of = append(of, describeValue(ls.Index(i)))
		}
		return ctrlscope.MaxOfSpec(of...), true
	}
	return nil, false
}

func durationField(v reflect.Value, name string) (time.Duration, bool) {
	n, ok := intField(v, name)
	return time.Duration(n), ok
}

func intField(v reflect.Value, name string) (int64, bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() < reflect.Int || f.Kind() > reflect.Int64 {
		return 0, false
	}
	return f.Int(), true
}
