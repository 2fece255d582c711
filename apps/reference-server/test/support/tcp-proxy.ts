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
  /**
   * Stall one connection: the first whose bytes towards the database match `pattern` (a statement's text) from
   * now on. Those bytes and all that follow on it, both ways, are dropped, its sockets kept open; every other
   * connection, and every new one, passes as before. `deliver`: the matching bytes still reach the database
   * (the statement runs), and only what follows, its answer first, is lost.
   */
  stallOn(pattern: RegExp, options?: { deliver?: boolean }): Stall;
  /**
   * Forget a `stallOn` that has not matched yet: left armed, it would stall whatever statement of a later
   * scenario matches first (a node's schema at its next start, say).
   */
  disarm(): void;
  /** How many connections the proxy has accepted so far. */
  readonly accepted: number;
  /** How many of them are open now. */
  readonly open: number;
  close(): Promise<void>;
}

/** The connection a `stallOn` stalled, once one matched. */
export interface Stall {
  /** A connection matched and went silent. */
  readonly stalled: boolean;
  /** The node closed the stalled connection itself (it gave up on it instead of keeping it). */
  readonly closedByNode: boolean;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
  silent: boolean;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'pass';
  let accepted = 0;
  const pairs = new Set<Pair>();
  let trigger:
    | { pattern: RegExp; deliver: boolean; stall: { stalled: boolean; closedByNode: boolean } }
    | undefined;
  const reset = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.resetAndDestroy();
    pair.server.resetAndDestroy();
  };
  const server: Server = createServer({ noDelay: true }, (client) => {
    accepted++;
    const upstream = connect({ ...target, noDelay: true });
    const pair: Pair = { client, server: upstream, silent: false };
    pairs.add(pair);
    let stall: { stalled: boolean; closedByNode: boolean } | undefined;
    const forward = (to: Socket, towardsDatabase: boolean) => (chunk: Buffer) => {
      if (towardsDatabase && trigger?.pattern.test(chunk.toString('latin1'))) {
        stall = trigger.stall;
        stall.stalled = true;
        if (trigger.deliver && mode === 'pass' && !to.destroyed) to.write(chunk);
        trigger = undefined;
        pair.silent = true;
      }
      if (mode === 'pass' && !pair.silent && !to.destroyed) to.write(chunk);
    };
    client.on('data', forward(upstream, true));
    upstream.on('data', forward(client, false));
    client.on('close', () => {
      if (stall !== undefined && pairs.has(pair)) stall.closedByNode = true;
    });
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
    stallOn(pattern, options = {}) {
      const stall = { stalled: false, closedByNode: false };
      trigger = { pattern, deliver: options.deliver === true, stall };
      return stall;
    },
    disarm() {
      trigger = undefined;
    },
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs.size;
    },
    async close() {
      for (const pair of [...pairs]) reset(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
