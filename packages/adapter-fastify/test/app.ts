import { Readable } from 'node:stream';
import { idempotency } from '@idem/adapter-fastify';
import type { AppResponse, MakeServer } from '@idem/adapter-suite';
import Fastify, { type FastifyReply } from 'fastify';

function send(reply: FastifyReply, answer: AppResponse) {
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
}

/** The suite's routes on a Fastify 5 app. */
export const fastifyServer: MakeServer = async ({ options, business }) => {
  const app = Fastify();
  await app.register(idempotency, {
    ...options,
    scope: (request) => request.headers['x-principal'] as string | undefined,
  });
  app.post('/orders', async (request, reply) => send(reply, business.createOrder(request.body)));
  app.get('/orders', async (_request, reply) => send(reply, business.listOrders()));
  app.post<{ Params: { code: string } }>('/status/:code', async (request, reply) =>
    send(reply, business.status(Number(request.params.code))),
  );
  app.post('/throw', async () => business.throws());
  app.post<{ Params: { ms: string } }>('/slow/:ms', async (request, reply) =>
    send(reply, await business.slow(Number(request.params.ms))),
  );
  app.post('/stream', async (_request, reply) => {
    const { chunks, delayMs } = business.stream();
    async function* produce() {
      for (const chunk of chunks) {
        yield chunk;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
    return reply.type('text/plain').send(Readable.from(produce()));
  });
  app.post<{ Params: { bytes: string } }>('/big/:bytes', async (request, reply) =>
    send(reply, business.big(Number(request.params.bytes))),
  );
  app.post('/binary', async (_request, reply) => send(reply, business.binary()));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
};
