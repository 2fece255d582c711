import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Start the local 3-master Redis Cluster the store-settings suites use when it is not running (and redis-server is
 * installed), as @idem/store-redis's suites do. A cluster named by REDIS_CLUSTER_NODES is left alone.
 */
export default function setup(): void {
  if (process.env.REDIS_CLUSTER_NODES !== undefined) return;
  const script = fileURLToPath(new URL('../../../scripts/redis-cluster.sh', import.meta.url));
  try {
    execFileSync('bash', [script], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
  } catch (error) {
    // The suites report the missing cluster themselves: a skip with the reason, or a failure under CI=true.
    console.warn(`could not start the local Redis Cluster: ${(error as Error).message}`);
  }
}
