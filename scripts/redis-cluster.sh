#!/usr/bin/env bash
# A local Redis Cluster on loopback (ports REDIS_CLUSTER_PORTS, default 7001 7002 7003), no persistence, for
# tests and benchmarks: 3 masters by default, or masters with REDIS_CLUSTER_REPLICAS replicas each (1 with six
# ports makes 3 masters + 3 replicas; redis-cli picks which node is which). REDIS_CLUSTER_NODE_TIMEOUT (ms,
# default 2000) is how long a node may not answer before it is failed (and, with replicas, failed over); a
# replica's full sync starts at once (no diskless-sync delay), so a restarted node is a replica again in a second.
# Idempotent: nodes that answer are left alone, stopped ones are started again from their directory (same node
# id, same slots, or a replica of whoever took them over), and the cluster is created only once.
#   bash scripts/redis-cluster.sh          start (or repair) it and wait until cluster_state:ok
#   bash scripts/redis-cluster.sh stop     shut every node down and forget the cluster
set -euo pipefail

ports=(${REDIS_CLUSTER_PORTS:-7001 7002 7003})
replicas=${REDIS_CLUSTER_REPLICAS:-0}
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-2000}
dir=${REDIS_CLUSTER_DIR:-${TMPDIR:-/tmp}/idem-redis-cluster}

answers() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

if [ "${1:-start}" = stop ]; then
  for port in "${ports[@]}"; do redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$dir"
  exit 0
fi

for port in "${ports[@]}"; do
  answers "$port" && continue
  mkdir -p "$dir/$port"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$dir/$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$node_timeout" \
    --save '' --appendonly no --repl-diskless-sync-delay 0 \
    --logfile "$dir/$port/redis.log" --pidfile "$dir/$port/redis.pid"
done
for port in "${ports[@]}"; do
  for _ in $(seq 1 50); do answers "$port" && break; sleep 0.1; done
  answers "$port" || { echo "redis-cluster: node $port did not start (see $dir/$port/redis.log)" >&2; exit 1; }
done

state() { redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p'; }
known() { redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p'; }
if [ "$(known)" != "${#ports[@]}" ]; then
  # Nodes that never joined (or were started afresh): make one cluster of all of them.
  for port in "${ports[@]}"; do redis-cli -h 127.0.0.1 -p "$port" cluster reset hard >/dev/null; done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-replicas "$replicas" --cluster-yes >/dev/null
fi
for _ in $(seq 1 100); do
  [ "$(state)" = ok ] && { echo "redis-cluster: ${ports[*]} ok"; exit 0; }
  sleep 0.2
done
echo "redis-cluster: cluster_state is $(state), not ok" >&2
exit 1
