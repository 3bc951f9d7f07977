package clientgo

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// customLimiter is a limiter client-go does not define.
type customLimiter struct {
	workqueue.TypedRateLimiter[string]
}

func specJSON(t *testing.T, l workqueue.TypedRateLimiter[string]) string {
	t.Helper()
	b, err := json.Marshal(DescribeRateLimiter(l))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDescribeRateLimiterReadsClientGosLimiters(t *testing.T) {
	cases := []struct {
		name    string
		limiter workqueue.TypedRateLimiter[string]
		want    string
	}{
		{"controller-runtime's default", workqueue.DefaultTypedControllerRateLimiter[string](),
			`{"of":[{"base":0.005,"max":1000,"type":"exponential"},{"burst":100,"qps":10,"type":"bucket"}],"type":"max_of"}`},
		{"the priority queue's default", workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			`{"base":0.005,"max":1000,"type":"exponential"}`},
		{"fast-slow", workqueue.NewTypedItemFastSlowRateLimiter[string](time.Second, time.Minute, 3),
			`{"fast":1,"fast_attempts":3,"slow":60,"type":"fast_slow"}`},
		{"observed (the wrapper is seen through)", ObserveRateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)),
			`{"base":0.001,"max":1,"type":"exponential"}`},
		{"a limiter of its own", customLimiter{}, `{"name":"clientgo.customLimiter","type":"other"}`},
		{"an unlimited bucket inside max-of", workqueue.NewTypedMaxOfRateLimiter[string](
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Inf, 1)}),
			`{"of":[{"name":"workqueue.TypedBucketRateLimiter[string]","type":"other"}],"type":"max_of"}`},
	}
	for _, c := range cases {
		if got := specJSON(t, c.limiter); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
