package ctrlscope

import (
	"fmt"
	"os"
)

// Environment variables the dashboard reads too: a publisher started with PublisherFromEnv
// writes where a dashboard started in the same environment reads.
const (
	EnvRedisURL = "REDIS_URL"        // default DefaultRedisURL
	EnvPrefix   = "CTRLSCOPE_PREFIX" // default "ctrlscope:"
)

// DefaultRedisURL is where the demo's Redis listens.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// PublisherFromEnv is NewPublisher for the Redis and key prefix the environment names (REDIS_URL,
// or REDIS_SENTINELS with REDIS_MASTER_NAME, which win; CTRLSCOPE_PREFIX); fields of opts other
// than Prefix are kept.
func PublisherFromEnv(opts PublisherOptions) (*Publisher, error) {
	url, err := RedisURLFromEnv(os.Getenv, DefaultRedisURL)
	if err != nil {
		return nil, fmt.Errorf("ctrlscope: %w", err)
	}
	if p := os.Getenv(EnvPrefix); p != "" {
		opts.Prefix = p
	}
	return NewPublisher(url, opts)
}
