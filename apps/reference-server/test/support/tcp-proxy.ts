import { connect, createServer, type Server, type Socket } from 'node:net';

/** How a proxy treats its connections: `pass` bytes both ways, `blackhole` them (sockets stay open, silent). */
export type ProxyMode = 'pass' | 'blackhole';

/**
 * A loopback TCP proxy between one node and its database, that can cut the path (reset every connection, as a
 * dropped route or a restarted firewall does) or partition it (keep the sockets open and drop every byte, as a
 * network that stops answering does). While partitioned, new connections are accepted and hang too.
 */
export interface TcpProxy {
  readonly port: number;
  /** Reset every open connection (both sides); new ones pass as before. Returns how many were cut. */
  cut(): number;
  /** Drop every byte from now on, connections kept open, new ones accepted and silent. */
  partition(): void;
  /** End a partition: the connections that went silent are reset (their streams lost bytes), new ones pass. */
  heal(): void;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'pass';
  const pairs = new Set<Pair>();
  const reset = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.resetAndDestroy();
    pair.server.resetAndDestroy();
  };
  const server: Server = createServer({ noDelay: true }, (client) => {
    const upstream = connect({ ...target, noDelay: true });
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    const forward = (to: Socket) => (chunk: Buffer) => {
      if (mode === 'pass' && !to.destroyed) to.write(chunk);
    };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
    const end = () => {
      if (!pairs.has(pair)) return;
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    port: address.port,
    cut() {
      const count = pairs.size;
      for (const pair of [...pairs]) reset(pair);
      return count;
    },
    partition() {
      mode = 'blackhole';
    },
    heal() {
      for (const pair of [...pairs]) reset(pair);
      mode = 'pass';
    },
    async close() {
      for (const pair of [...pairs]) reset(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
