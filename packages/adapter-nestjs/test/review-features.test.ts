/** Review: Nest features around the interceptor, on both platforms. */
import { Readable } from 'node:stream';
import { IdempotencyModule, Idempotent, type NestHttpRequest } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import {
  type ArgumentsHost,
  BadRequestException,
  Body,
  type CallHandler,
  type CanActivate,
  Catch,
  ConflictException,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Header,
  HttpCode,
  Injectable,
  Module,
  type NestInterceptor,
  type PipeTransform,
  Post,
  Put,
  Redirect,
  Res,
  StreamableFile,
  UnauthorizedException,
  UseFilters,
  UseGuards,
  UseInterceptors,
  UsePipes,
} from '@nestjs/common';
import 'reflect-metadata';
import { concat, delay, map, type Observable, of, throwError, timer } from 'rxjs';
import { v7 } from 'uuid';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { closeApps, counting, platforms, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;
beforeEach(() => {
  runs = 0;
});

@Injectable()
class DenyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<NestHttpRequest>();
    if (req.headers['x-deny'] === 'throw') throw new UnauthorizedException();
    return req.headers['x-deny'] === undefined;
  }
}

@Injectable()
class RequireName implements PipeTransform {
  transform(value: unknown) {
    if (typeof (value as { name?: unknown })?.name !== 'string')
      throw new BadRequestException('name required');
    return value;
  }
}

@Catch(ConflictException)
class ConflictToOk implements ExceptionFilter {
  catch(_error: unknown, host: ArgumentsHost) {
    const res = host.switchToHttp().getResponse<{
      status?: (n: number) => { json: (b: unknown) => void };
      code?: (n: number) => { send: (b: unknown) => void };
    }>();
    if (res.code) res.code(200).send({ filtered: true, run: runs });
    else res.status?.(200).json({ filtered: true, run: runs });
  }
}

@Injectable()
class WrapInterceptor implements NestInterceptor {
  intercept(_c: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map((data) => ({ wrapped: data })));
  }
}

type AnyRes = {
  raw?: unknown;
  header?: (n: string, v: string) => void;
  setHeader?: (n: string, v: string) => void;
  status?: (n: number) => void;
  code?: (n: number) => void;
};

@Controller()
class C {
  @Post('guarded')
  @UseGuards(DenyGuard)
  guarded() {
    return { run: ++runs };
  }
  @Post('piped')
  @UsePipes(RequireName)
  piped(@Body() body: { name: string }) {
    return { run: ++runs, name: body.name };
  }
  @Post('filtered')
  @UseFilters(ConflictToOk)
  filtered() {
    ++runs;
    throw new ConflictException();
  }
  @Post('wrapped')
  @UseInterceptors(WrapInterceptor)
  wrapped() {
    return { run: ++runs };
  }
  @Post('code')
  @HttpCode(202)
  @Header('x-custom', 'yes')
  @Header('etag', '"v1"')
  code() {
    return { run: ++runs };
  }
  @Post('redirect')
  @Redirect('https://example.com/done', 301)
  redirect() {
    ++runs;
  }
  @Post('dyn-redirect')
  @Redirect('https://example.com/default', 302)
  dynRedirect() {
    return { url: `https://example.com/order/${++runs}`, statusCode: 303 };
  }
  @Post('file')
  file() {
    ++runs;
    return new StreamableFile(Buffer.from(`file ${runs}`), { type: 'text/plain' });
  }
  @Post('stream-file')
  streamFile() {
    ++runs;
    return new StreamableFile(Readable.from([Buffer.from('a,'), Buffer.from(`b${runs}`)]), {
      type: 'text/csv',
    });
  }
  @Post('buffer')
  buffer() {
    return Buffer.from(`buf ${++runs}`);
  }
  @Post('string')
  string() {
    return `str ${++runs}`;
  }
  @Post('undefined')
  undef() {
    ++runs;
    return undefined;
  }
  @Post('null')
  nul() {
    ++runs;
    return null;
  }
  @Post('promise')
  async promise() {
    await sleep(20);
    return { run: ++runs };
  }
  @Post('passthrough')
  passthrough(@Res({ passthrough: true }) res: AnyRes) {
    ++runs;
    if (res.code) {
      res.code(207);
      res.header?.('etag', `"p${runs}"`);
    } else {
      res.status?.(207);
      res.setHeader?.('etag', `"p${runs}"`);
    }
    return { run: runs };
  }
  @Post('many')
  many() {
    ++runs;
    return concat(of({ n: 1 }), of({ n: 2 }).pipe(delay(10)), of({ n: 3, run: runs }).pipe(delay(10)));
  }
  @Post('obs-error')
  obsError() {
    ++runs;
    return concat(
      of(1),
      timer(10).pipe(
        map(() => {
          throw new Error('boom');
        }),
      ),
    );
  }
  @Post('obs-http-error')
  obsHttpError() {
    ++runs;
    return throwError(() => new BadRequestException('bad'));
  }
  @Post('late-throw')
  async lateThrow() {
    ++runs;
    await sleep(30);
    throw new Error('late');
  }
  @Post('late-409')
  async late409() {
    ++runs;
    await sleep(30);
    throw new ConflictException('taken');
  }
  @Put('put-covered')
  @Idempotent({ methods: ['PUT'] })
  putCovered() {
    return { run: ++runs };
  }
}

async function app(platform: (typeof platforms)[number], methods?: string[]) {
  const { store, counts } = counting(createMemoryStore());
  @Module({
    imports: [IdempotencyModule.forRoot({ store, ...(methods ? { methods } : {}) })],
    controllers: [C],
    providers: [DenyGuard, RequireName, WrapInterceptor],
  })
  class AppModule {}
  const { url } = await startApp(platform, AppModule);
  return { url, counts };
}

async function twice(url: string, path: string, body: unknown = {}) {
  const key = v7();
  const a = await post(url + path, key, body, { redirect: 'manual' });
  const aBody = Buffer.from(await a.arrayBuffer()).toString();
  const b = await post(url + path, key, body, { redirect: 'manual' });
  const bBody = Buffer.from(await b.arrayBuffer()).toString();
  return { a, aBody, b, bBody };
}

describe.each(platforms)('Nest features on platform-%s', (platform) => {
  test('a guard that denies (403) or throws (401) reserves nothing; the key then still works', async () => {
    const { url, counts } = await app(platform);
    const key = v7();
    expect((await post(`${url}/guarded`, key, {}, { headers: { 'x-deny': '1' } })).status).toBe(403);
    expect((await post(`${url}/guarded`, key, {}, { headers: { 'x-deny': 'throw' } })).status).toBe(401);
    expect(counts.reserve).toBe(0);
    const ok = await post(`${url}/guarded`, key);
    expect(ok.status).toBe(201);
    expect(runs).toBe(1);
  });

  test('a pipe that throws 400: stored (deterministic), replayed, the handler never ran', async () => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, '/piped', { nope: 1 });
    expect(a.status).toBe(400);
    expect(b.status).toBe(400);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(bBody).toBe(aBody);
    expect(runs).toBe(0);
  });

  test('an exception filter that answers 200: its answer is what is stored', async () => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, '/filtered');
    expect(a.status).toBe(200);
    expect(JSON.parse(aBody)).toEqual({ filtered: true, run: 1 });
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(bBody).toBe(aBody);
    expect(runs).toBe(1);
  });

  test('an inner interceptor mapping the value: the mapped value is stored', async () => {
    const { url } = await app(platform);
    const { b, aBody, bBody } = await twice(url, '/wrapped');
    expect(JSON.parse(aBody)).toEqual({ wrapped: { run: 1 } });
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(bBody).toBe(aBody);
  });

  test('@HttpCode and @Header: the replay has the status and the allow-listed headers', async () => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, '/code');
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.headers.get('etag')).toBe('"v1"');
    expect(bBody).toBe(aBody);
    expect(runs).toBe(1);
  });

  test('@Redirect (static and dynamic): replayed with status and location', async () => {
    const { url } = await app(platform);
    const s = await twice(url, '/redirect');
    expect(s.a.status).toBe(301);
    expect(s.b.status).toBe(301);
    expect(s.b.headers.get('location')).toBe('https://example.com/done');
    const d = await twice(url, '/dyn-redirect');
    expect(d.a.status).toBe(303);
    expect(d.b.status).toBe(303);
    expect(d.b.headers.get('location')).toBe(d.a.headers.get('location'));
    expect(runs).toBe(2);
  });

  test.each([
    ['/file', 'file 1'],
    ['/stream-file', 'a,b1'],
    ['/buffer', undefined], // Nest on Express serializes a Buffer as JSON: its business, not the adapter's
    ['/string', 'str 1'],
    ['/promise', '{"run":1}'],
  ])('%s: replayed byte for byte with its content type', async (path, expected) => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, path);
    if (expected !== undefined) expect(aBody).toBe(expected);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.status).toBe(a.status);
    expect(b.headers.get('content-type')).toBe(a.headers.get('content-type'));
    expect(bBody).toBe(aBody);
    expect(runs).toBe(1);
  });

  test.each(['/undefined', '/null'])('%s: replayed as it was sent', async (path) => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, path);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.status).toBe(a.status);
    expect(bBody).toBe(aBody);
    expect(runs).toBe(1);
  });

  test('@Res({ passthrough: true }) setting status and header', async () => {
    const { url } = await app(platform);
    const { a, b, aBody, bBody } = await twice(url, '/passthrough');
    expect(a.status).toBe(207);
    expect(b.status).toBe(207);
    expect(b.headers.get('etag')).toBe('"p1"');
    expect(bBody).toBe(aBody);
  });

  test('an Observable emitting several values: the last is sent and replayed', async () => {
    const { url } = await app(platform);
    const { b, aBody, bBody } = await twice(url, '/many');
    expect(JSON.parse(aBody)).toEqual({ n: 3, run: 1 });
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(bBody).toBe(aBody);
  });

  test('an Observable that errors (500): released, the retry runs again', async () => {
    const { url } = await app(platform);
    const { a, b } = await twice(url, '/obs-error');
    expect(a.status).toBe(500);
    expect(b.status).toBe(500);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(runs).toBe(2);
  });

  test('an Observable that errors with a 400: stored and replayed', async () => {
    const { url } = await app(platform);
    const { a, b } = await twice(url, '/obs-http-error');
    expect(a.status).toBe(400);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });

  test('an async handler throwing after a delay: 500 released, 409 stored', async () => {
    const { url } = await app(platform);
    const e = await twice(url, '/late-throw');
    expect(e.a.status).toBe(500);
    expect(e.b.headers.get('idempotent-replayed')).toBeNull();
    const c = await twice(url, '/late-409');
    expect(c.a.status).toBe(409);
    expect(c.b.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(3);
  });

  test('a handler-level override of methods covers PUT on that route only', async () => {
    const { url } = await app(platform, ['POST']);
    const key = v7();
    const put = (k: string) =>
      fetch(`${url}/put-covered`, { method: 'PUT', headers: { 'idempotency-key': k } });
    await put(key);
    expect((await put(key)).headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });
});
