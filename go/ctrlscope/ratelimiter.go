package ctrlscope

import "time"

// RateLimiterSpec describes a workqueue's rate limiter (protocol v1.5, protocol/README.md
// "RateLimiterSpec"): a JSON object with a "type" (RateLimiterType) and that type's fields, durations
// in seconds. With it the dashboard says which part of the limiter chose each retry's delay and what
// a key's next delay will be. Build one with the constructors below (clientgo.DescribeRateLimiter
// builds it from a client-go limiter).
type RateLimiterSpec map[string]any

// ExponentialSpec is client-go's ItemExponentialFailureRateLimiter: per key, the n-th retry waits
// base·2^(n−1), at most max.
func ExponentialSpec(base, max time.Duration) RateLimiterSpec {
	return RateLimiterSpec{"type": string(RateLimiterTypeExponential), "base": base.Seconds(), "max": max.Seconds()}
}

// FastSlowSpec is client-go's ItemFastSlowRateLimiter: per key, fast for the first fastAttempts
// retries, then slow.
func FastSlowSpec(fast, slow time.Duration, fastAttempts int) RateLimiterSpec {
	return RateLimiterSpec{"type": string(RateLimiterTypeFastSlow), "fast": fast.Seconds(), "slow": slow.Seconds(),
		"fast_attempts": fastAttempts}
}

// BucketSpec is client-go's BucketRateLimiter: one token bucket for every key of the queue, qps
// retries a second after a burst.
func BucketSpec(qps float64, burst int) RateLimiterSpec {
	return RateLimiterSpec{"type": string(RateLimiterTypeBucket), "qps": qps, "burst": burst}
}

// MaxOfSpec is client-go's MaxOfRateLimiter: the longest delay of its limiters.
func MaxOfSpec(of ...RateLimiterSpec) RateLimiterSpec {
	if of == nil {
		of = []RateLimiterSpec{}
	}
	return RateLimiterSpec{"type": string(RateLimiterTypeMaxOf), "of": of}
}

// OtherSpec is a limiter that cannot be described; name says what it is (its type, for people).
func OtherSpec(name string) RateLimiterSpec {
	return RateLimiterSpec{"type": string(RateLimiterTypeOther), "name": name}
}

// ControllerRateLimiter says what controller's workqueue rate limiter is: its components entry gets
// rate_limiter (kept by later Controller calls, which do not name it).
func (t *Telemetry) ControllerRateLimiter(controller string, spec RateLimiterSpec) {
	t.component(controller, ComponentKindController, map[string]any{"rate_limiter": map[string]any(spec)})
	c := t.ControllerTopic(controller)
	c.mu.Lock()
	c.limiter = spec // failing's max_delay
	c.mu.Unlock()
}
