import { Readable } from 'node:stream';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { type AppResponse, BODY_KIND_TYPE, type MakeServer, toBodyKind } from '@idem/adapter-suite';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';

function send(reply: FastifyReply, answer: AppResponse) {
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
}

type Params<K extends string> = { Params: Record<K, string> };

/** The suite's routes on a Fastify 5 app. */
export const fastifyServer: MakeServer = async ({ options, business }) => {
  const app = Fastify();
  await app.register(fastifyIdempotency, {
    ...options,
    scope:
      (options.scope as ((request: FastifyRequest) => string | undefined) | undefined) ??
      ((request) => request.headers['x-principal'] as string | undefined),
  } as Parameters<typeof fastifyIdempotency>[1]);
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );
  // A body kind the suite names (an ArrayBuffer, a Blob, a typed array …); multipart bodies as bytes.
  app.addContentTypeParser(BODY_KIND_TYPE, { parseAs: 'buffer' }, (request, body, done) =>
    done(null, toBodyKind(request.headers['x-body-kind'] as string | undefined, body as Buffer)),
  );
  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_request, body, done) =>
    done(null, body),
  );
  // Handed on unread: the handler streams the upload itself.
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));
  app.post('/orders', async (request, reply) => send(reply, business.createOrder(request.body)));
  app.get('/orders', async (_request, reply) => send(reply, business.listOrders()));
  app.post<Params<'id'>>('/items/:id', async (request, reply) =>
    send(reply, business.item(request.params.id, request.body)),
  );
  app.post<Params<'code'>>('/status/:code', async (request, reply) =>
    send(reply, business.status(Number(request.params.code))),
  );
  app.post('/throw', async () => business.throws());
  app.post<Params<'ms'>>('/slow/:ms', async (request, reply) =>
    send(reply, await business.slow(Number(request.params.ms))),
  );
  // Written on the raw response after hijacking: what the plugin stores must not depend on reply.send.
  app.post<Params<'ms'>>('/late/:ms', async (request, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/plain' });
    reply.raw.flushHeaders();
    reply.raw.end(await business.late(Number(request.params.ms)));
  });
  app.post<Params<'name'>>('/plan/:name', async (request, reply) =>
    reply.type('text/plain').send(Readable.from(business.plan(request.params.name))),
  );
  app.post<Params<'point'>>('/throw-after/:point', async (request, reply) => {
    const run = business.throwAfter(request.params.point);
    reply.raw.writeHead(200, { 'content-type': 'text/plain' });
    reply.raw.flushHeaders();
    if (run.point !== 'status') reply.raw.write('first,');
    if (run.point === 'end') reply.raw.end('end');
    await new Promise((resolve) => setTimeout(resolve, 20));
    run.fail();
  });
  app.post('/destroy', async (_request, reply) => {
    business.destroy();
    reply.hijack();
    setTimeout(() => reply.raw.destroy(), 10);
  });
  app.put<Params<'id'>>('/files/:id', async (request, reply) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request.body as AsyncIterable<Buffer>) chunks.push(chunk);
    return send(reply, business.upload(request.params.id, Buffer.concat(chunks).toString()));
  });
  app.post<Params<'bytes'>>('/big/:bytes', async (request, reply) =>
    send(reply, business.big(Number(request.params.bytes))),
  );
  app.post('/binary', async (_request, reply) => send(reply, business.binary()));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
};
