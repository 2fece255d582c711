import type { Cluster, Redis } from 'ioredis';
import { classNames } from './class-chain.js';
import type { RedisConnection, Reply } from './connection.js';

/**
 * An ioredis `Redis` or `Cluster`. ioredis mixes EventEmitter into both classes, which overwrites their
 * `constructor`, so they are recognised by their base class `Commander` and the `isCluster` flag both declare.
 */
export function isIoredis(client: unknown): client is Redis | Cluster {
  return (
    classNames(client).includes('Commander') &&
    typeof (client as { isCluster?: unknown }).isCluster === 'boolean'
  );
}

/**
 * ioredis: `callBuffer` for binary-safe replies; on a Cluster ioredis finds the key in the command (by its
 * command table), routes it and follows MOVED/ASK itself. With a replica acknowledgement the command and the
 * WAIT go in one pipeline: ioredis sends a pipeline to the node of its keyed command, so the keyless WAIT runs
 * on the connection that made the write.
 */
export function ioredisConnection(client: Redis | Cluster): RedisConnection {
  return {
    name: client.isCluster ? 'ioredis Cluster' : 'ioredis',
    async send(_key, [name, ...args], ack) {
      if (ack === undefined) return { reply: (await client.callBuffer(name, ...args)) as Reply };
      const results = await client
        .pipeline()
        .callBuffer(name, ...args)
        .call('WAIT', ack.count, ack.timeoutMs)
        .exec();
      const [[commandError, reply] = [], [waitError, acknowledged] = []] = results ?? [];
      if (commandError) throw commandError;
      if (waitError) throw waitError;
      return { reply: reply as Reply, acknowledged: Number(acknowledged) };
    },
    async loadScript(source) {
      const nodes = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
      await Promise.all(nodes.map((node) => node.script('LOAD', source)));
    },
  };
}
