process.on('SIGTERM', () => process.exit(0)); // flush a --cpu-prof profile when the bench stops us

// One benchmark server per process, chosen by argv[2]; prints its port on stdout when listening.
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { fastifyIdempotency } from '../src/index.js';

const app = Fastify();
if (process.argv[2] === 'idem') await app.register(fastifyIdempotency, { store: createMemoryStore() });
if (process.argv[2] === 'noop-hooks') {
  app.addHook('preHandler', async () => {});
  app.addHook('onSend', async (_request, _reply, payload) => payload);
  app.addHook('onResponse', async () => {});
}
let orders = 0;
app.post<{ Body: { item: string; lines: unknown[] } }>('/orders', async (request, reply) => {
  orders++;
  return reply.code(201).send({ id: orders, item: request.body.item, lines: request.body.lines.length });
});
app.get('/count', async () => ({ orders }));
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
console.log(typeof address === 'object' && address ? address.port : 0);
