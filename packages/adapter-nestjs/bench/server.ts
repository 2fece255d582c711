process.on('SIGTERM', () => process.exit(0)); // flush a --cpu-prof profile when the bench stops us

// One benchmark server per process, chosen by argv[2] (`plain`, `floor`, `idem`, each `…-fastify` on Fastify);
// prints its port on stdout when listening.
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { createMemoryStore } from '@idem/store-memory';
import {
  type CallHandler,
  Controller,
  type DynamicModule,
  type ExecutionContext,
  Get,
  HttpException,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  Req,
} from '@nestjs/common';
import { APP_INTERCEPTOR, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { NEVER, type Observable } from 'rxjs';
import { IdempotencyModule } from '../src/index.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
type Done = { status: number; type: string; payload: string };
type Entry = { fingerprint: string; done?: Done };
/** The floor's key and fingerprint of a request it reserved, for the hand-over point to finalize. */
type FloorRequest = { floorKey?: string; floorFingerprint?: string };

/** The payload `res.end` was handed, as text (Express's `res.send` passes a string or a Buffer). */
const sent = (chunk: unknown): string | undefined =>
  typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString() : undefined;
const typeOf = (header: unknown): string => String(header ?? 'application/json');

/**
 * The floor: the least any Idempotency-Key interceptor must do on Nest, as the cost issue defines the floor. A
 * UUIDv7 regex on the header (400 if it is not one), the raw body Nest keeps (`rawBody: true`), a SHA-256 over
 * method, URL and raw body, a `Map` reserve (a completed key replays its status, content type and payload, an
 * in-flight one answers 409, another fingerprint 422), the sent payload taken where the platform hands it over
 * (Express: `res.end`'s chunk; Fastify: the payload of an `onSend` hook, {@link floorOnSend}) and a `Map`
 * finalize (a server error, or a body written in pieces, is not kept: a retry runs again).
 */
const keys = new Map<string, Entry>();
@Injectable()
class FloorInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const key = request.headers['idempotency-key'];
    if (key === undefined || request.method !== 'POST') return next.handle();
    if (typeof key !== 'string' || !UUID_V7.test(key))
      throw new HttpException('Idempotency-Key must be a UUIDv7', 400);
    const fingerprint = createHash('sha256')
      .update(`${request.method} ${request.url}\n`)
      .update(request.rawBody ?? '')
      .digest('base64url');
    const entry = keys.get(key);
    const response = http.getResponse();
    if (entry !== undefined) {
      if (entry.fingerprint !== fingerprint) throw new HttpException('key reused, other request', 422);
      if (entry.done === undefined) throw new HttpException('request in flight', 409);
      // Replayed here (Express's `res` and Fastify's reply both have these): the handler does not run, and
      // nothing is emitted for Nest to send.
      const { status, type, payload } = entry.done;
      if ('raw' in response) response.code(status).type(type).send(payload);
      else response.status(status).type(type).send(payload);
      return NEVER;
    }
    keys.set(key, { fingerprint });
    if ('raw' in response) {
      // Fastify: finalized by floorOnSend.
      (request as FloorRequest).floorKey = key;
      (request as FloorRequest).floorFingerprint = fingerprint;
    } else {
      const res = response as ServerResponse;
      const end = res.end;
      res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
        keep(key, fingerprint, res.statusCode, typeOf(res.getHeader('content-type')), sent(chunk));
        return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
      } as typeof res.end;
    }
    return next.handle();
  }
}

function keep(
  key: string,
  fingerprint: string,
  status: number,
  type: string,
  payload: string | undefined,
): void {
  if (status >= 500 || payload === undefined) keys.delete(key);
  else keys.set(key, { fingerprint, done: { status, type, payload } });
}

/** The floor's hand-over point on Fastify: the last `onSend` hook's payload. */
function floorOnSend(app: NestFastifyApplication): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.decorateRequest('floorKey', undefined);
  fastify.decorateRequest('floorFingerprint', undefined);
  fastify.addHook('onSend', async (request, reply, payload) => {
    const { floorKey, floorFingerprint } = request as unknown as FloorRequest;
    if (floorKey === undefined) return payload;
    const type = typeOf(reply.getHeader('content-type'));
    keep(
      floorKey,
      floorFingerprint as string,
      reply.statusCode,
      type,
      typeof payload === 'string' ? payload : undefined,
    );
    return payload;
  });
}

let orders = 0;
@Controller()
class OrdersController {
  @Post('orders')
  create(@Req() request: { body: { item: string; lines: unknown[] } }) {
    orders++;
    return { id: orders, item: request.body.item, lines: request.body.lines.length };
  }
  @Get('count')
  count() {
    return { orders };
  }
}

const variant = process.argv[2] ?? 'plain';
const [kind, platform] = variant.split('-') as [string, string | undefined];
const imports: DynamicModule[] =
  kind === 'idem' ? [IdempotencyModule.forRoot({ store: createMemoryStore() })] : [];
const providers = kind === 'floor' ? [{ provide: APP_INTERCEPTOR, useClass: FloorInterceptor }] : [];
@Module({ imports, controllers: [OrdersController], providers })
class AppModule {}
const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
const app = await NestFactory.create(AppModule, adapter, { logger: false, rawBody: true });
if (variant === 'floor-fastify') floorOnSend(app as NestFastifyApplication);
await app.listen(0, '127.0.0.1');
console.log(new URL(await app.getUrl()).port);
