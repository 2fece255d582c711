import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CapturedResponse, DEFAULT_REPLAY_HEADERS, type Execution } from '@idem/core';

export type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** A listening server on a free port for one test; `close` ends every connection and stops it. */
export async function listen(handler: Handler): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One request; resolves to its status and body, or to the error that ended it (a socket hang up). */
export function send(
  port: number,
  init: { method?: string; path?: string; headers?: Record<string, string | string[]>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string } | { error: Error }> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: init.method ?? 'POST',
        path: init.path ?? '/',
        headers: init.headers,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', (error) => resolve({ error }));
      },
    );
    req.on('error', (error) => resolve({ error }));
    req.end(init.body);
  });
}

/** A request whose client leaves once `leave` resolves (after the server has it, before any answer). */
export function sendAndLeave(
  port: number,
  leave: Promise<unknown>,
  headers: Record<string, string> = {},
): void {
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers });
  req.on('error', () => {});
  req.end('x');
  void leave.then(() => req.destroy());
}

/** A promise with the function that resolves it (Node.js 20 has no Promise.withResolvers). */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** An execution that records how it was settled, for the capture's own tests. */
export function fakeExecution(
  maxBodyBytes = 1024,
  storedHeaders: readonly string[] = DEFAULT_REPLAY_HEADERS,
) {
  const finished: CapturedResponse[] = [];
  let aborts = 0;
  let settle: (how: 'finish' | 'abort') => void = () => {};
  const settled = new Promise<'finish' | 'abort'>((resolve) => {
    settle = resolve;
  });
  const execution = {
    maxBodyBytes,
    storedHeaders: new Set(storedHeaders),
    async finish(response: CapturedResponse) {
      finished.push(response);
      settle('finish');
    },
    async abort() {
      aborts++;
      settle('abort');
    },
  } as unknown as Execution;
  return {
    execution,
    finished,
    settled,
    get aborts() {
      return aborts;
    },
  };
}

/** A key the `token` format accepts, fresh for each test. */
export const newKey = (): string => randomUUID();

/** Resolves on the next event `name` of `emitter`. */
export const next = (emitter: NodeJS.EventEmitter, name: string): Promise<unknown> =>
  new Promise((resolve) => emitter.once(name, resolve));
