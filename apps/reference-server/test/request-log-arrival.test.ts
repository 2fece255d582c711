import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import fp from 'fastify-plugin';
import { afterEach, expect, test } from 'vitest';
import { OneLineRequests, requestLog } from '../src/observability/request-log.js';

// The request line keeps when a request arrived on the request itself. A client that leaves while a hook
// registered before the request log still waits is told aborted after the time it waited, never after the
// process's uptime (an arrival of 0) or nothing.
const apps: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

test('a request aborted before the request log saw it arrive: its line says so, with a time of its own', async () => {
  const lines: { aborted?: boolean; responseTimeMs?: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(JSON.parse(chunk.toString()));
      callback();
    },
  });
  const app = Fastify({ logger: { level: 'info', stream }, logController: new OneLineRequests() });
  apps.push(app);
  // Stands in for the plugin the request log comes after, with an onRequest hook that waits.
  await app.register(
    fp(
      async (inner) => {
        inner.addHook('onRequest', async () => {
          await sleep(400);
        });
      },
      { name: 'reference-server/observability' },
    ),
  );
  await app.register(requestLog);
  app.get('/slow', async () => 'done');
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  await sleep(1_500); // the process is older than any request's own time

  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
  await sleep(100);
  socket.destroy();
  await sleep(600);

  const aborted = lines.filter((line) => line.aborted === true);
  expect(aborted).toHaveLength(1);
  expect(aborted[0]?.responseTimeMs).toBeLessThan(1_000);
});
