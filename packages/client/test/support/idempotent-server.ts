import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Fault, startLossyProxy } from '../../../adapter-suite/src/lossy-proxy.js';

/** One request as it reached the server: its key, content type and body bytes. */
export interface Arrival {
  readonly key: string | undefined;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

interface Stored {
  readonly fingerprint: string;
  readonly status: number;
  readonly body: string;
}

/**
 * A loopback server that keeps the idempotency contract as idem's coordinator does, reduced to what the client
 * tests need: the first request with a key runs the handler and its answer is stored; a retry with the same key
 * and the same request (method, path, content type and body bytes) gets that answer replayed
 * (`Idempotent-Replayed: true`); the same key on another request is refused with 422.
 */
export async function startIdempotentServer() {
  const arrivals: Arrival[] = [];
  const records = new Map<string, Stored>();
  let executions = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const key = req.headers['idempotency-key'] as string | undefined;
      const contentType = req.headers['content-type'];
      arrivals.push({ key, contentType, body });
      const fingerprint = createHash('sha256')
        .update(JSON.stringify([req.method, req.url, contentType ?? null]))
        .update(body)
        .digest('hex');
      const stored = key === undefined ? undefined : records.get(key);
      if (stored !== undefined && stored.fingerprint !== fingerprint) {
        res.writeHead(422, { 'content-type': 'application/json' });
        res.end('{"error":{"code":"IDEMPOTENCY_KEY_REUSED"}}');
        return;
      }
      if (stored !== undefined) {
        res.writeHead(stored.status, { 'content-type': 'application/json', 'idempotent-replayed': 'true' });
        res.end(stored.body);
        return;
      }
      executions++;
      const answer: Stored = { fingerprint, status: 201, body: JSON.stringify({ execution: executions }) };
      if (key !== undefined) records.set(key, answer);
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    executions: () => executions,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type IdempotentServer = Awaited<ReturnType<typeof startIdempotentServer>>;

/**
 * Run `body` against an idempotent server behind the lossy proxy, which does `script` with the first requests
 * (then delivers every one).
 */
export async function throughLossyProxy(
  script: readonly Fault[],
  body: (proxyUrl: string, server: IdempotentServer) => Promise<void>,
): Promise<void> {
  const server = await startIdempotentServer();
  const none = { dropAnswer: 0, resetAfterForward: 0, resetBeforeForward: 0, answer503: 0 };
  const proxy = await startLossyProxy(server.url, { faults: none, script });
  try {
    await body(proxy.url, server);
  } finally {
    await proxy.close();
    await server.close();
  }
}
