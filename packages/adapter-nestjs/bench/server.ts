process.on('SIGTERM', () => process.exit(0)); // flush a --cpu-prof profile when the bench stops us

// One benchmark server per process, chosen by argv[2] (`plain`, `floor`, `idem`, each `…-fastify` on Fastify);
// prints its port on stdout when listening.
import 'reflect-metadata';
import { createHash } from 'node:crypto';
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
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { type Observable, of, tap } from 'rxjs';
import { IdempotencyModule } from '../src/index.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
type Entry = { fingerprint: string; done?: unknown };

/**
 * The floor: the least any Idempotency-Key interceptor must do on Nest. A UUIDv7 regex on the header (400 if it
 * is not one), the raw body Nest keeps (`rawBody: true`), a SHA-256 over method, URL and raw body, a `Map`
 * reserve (a completed key replays its value, an in-flight one answers 409, another fingerprint 422), the
 * handler's value taken where Nest hands it over (the interceptor's observable) and a `Map` finalize.
 */
@Injectable()
class FloorInterceptor implements NestInterceptor {
  readonly #keys = new Map<string, Entry>();
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest();
    const key = request.headers['idempotency-key'];
    if (key === undefined || request.method !== 'POST') return next.handle();
    if (typeof key !== 'string' || !UUID_V7.test(key))
      throw new HttpException('Idempotency-Key must be a UUIDv7', 400);
    const fingerprint = createHash('sha256')
      .update(`${request.method} ${request.url}\n`)
      .update(request.rawBody ?? '')
      .digest('base64url');
    const entry = this.#keys.get(key);
    if (entry !== undefined) {
      if (entry.fingerprint !== fingerprint) throw new HttpException('key reused, other request', 422);
      if (entry.done === undefined) throw new HttpException('request in flight', 409);
      return of(entry.done);
    }
    this.#keys.set(key, { fingerprint });
    return next.handle().pipe(tap((done) => this.#keys.set(key, { fingerprint, done })));
  }
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
await app.listen(0, '127.0.0.1');
console.log(new URL(await app.getUrl()).port);
