#!/bin/sh
# Writes /conf/redis.conf and /conf/sentinel.conf for this pod (an init container runs it; the
# Sentinel rewrites its file at run time, so both live in an emptyDir, not in the ConfigMap).
# The master is whoever the Sentinels say it is now (after a failover it is not redis-0); only on a
# first start, when no Sentinel answers yet, is it redis-0.
set -eu
self="$(hostname).redis-headless"
master="$(timeout 3 redis-cli -h redis-sentinel -p 26379 --raw sentinel get-master-addr-by-name ctrlscope \
  2>/dev/null | head -n 1 || true)"
[ -n "$master" ] || master="redis-0.redis-headless"
{
  echo "port 6379"
  echo "dir /data"
  # No persistence: telemetry is live data, the workers rewrite their snapshots after a restart.
  echo 'save ""'
  echo "appendonly no"
  echo "replica-announce-ip $self"
  [ "$master" = "$self" ] || echo "replicaof $master 6379"
} > /conf/redis.conf
{
  echo "port 26379"
  echo "dir /data"
  echo "sentinel resolve-hostnames yes"
  echo "sentinel announce-hostnames yes"
  echo "sentinel announce-ip $self"
  echo "sentinel monitor ctrlscope $master 6379 2"
  echo "sentinel down-after-milliseconds ctrlscope 5000"
  echo "sentinel failover-timeout ctrlscope 60000"
  echo "sentinel parallel-syncs ctrlscope 1"
} > /conf/sentinel.conf
