package ctrlscope

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
)

// The tests use a real Redis (internal/testredis: REDIS_URL or the local one; CI always has one).
var (
	redisURL    = testredis.URL
	cleanPrefix = testredis.CleanPrefix
)

func testRedis(t *testing.T) *redis.Client { return testredis.Client(t) }
