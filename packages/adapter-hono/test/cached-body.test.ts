import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import { createMemoryStore } from '@idem/store-memory';
import { type Context, Hono } from 'hono';
import { validator } from 'hono/validator';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// A body an earlier middleware read through Hono's own reader (a CSRF check, an audit log, a method override, a
// validator mounted before). The request's own body is consumed then, and Hono keeps only what that reader
// gave: `c.req.arrayBuffer()` afterwards makes bytes again from it, and from a `FormData` under a random
// multipart boundary, so the same retry would read as another request. The middleware hashes what was kept as
// it was kept (the bytes, the text as received, the `FormData` as its entries), never bytes Hono made again:
// every retry of the very same request is the same request (design.md: "Equal fingerprints mean equal
// requests"), and a different body is another.

const URLENCODED = 'application/x-www-form-urlencoded';
const MULTIPART = 'multipart/form-data; boundary=----fixedboundary';

const multipart = (fields: Record<string, string>, file?: string) =>
  [
    ...Object.entries(fields).map(
      ([name, value]) =>
        `------fixedboundary\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
    ),
    ...(file === undefined
      ? []
      : [
          '------fixedboundary\r\nContent-Disposition: form-data; name="doc"; filename="a.txt"\r\n' +
            `Content-Type: text/plain\r\n\r\n${file}\r\n`,
        ]),
    '------fixedboundary--\r\n',
  ].join('');

interface Body {
  readonly type: string;
  readonly same: string;
  readonly other: string;
}

const forms: Record<string, Body> = {
  urlencoded: { type: URLENCODED, same: 'item=book&qty=1&_csrf=t0k3n', other: 'item=pen&qty=1&_csrf=t0k3n' },
  multipart: {
    type: MULTIPART,
    same: multipart({ item: 'book', _csrf: 't0k3n' }, 'hello'),
    other: multipart({ item: 'book', _csrf: 't0k3n' }, 'hellO'),
  },
};
const json: Body = {
  type: 'application/json',
  same: '{"item":"book","qty":1,"_csrf":"t0k3n"}',
  other: '{"item":"pen","qty":1,"_csrf":"t0k3n"}',
};

/** Earlier readers, each as a middleware mounted before the idempotency middleware, and the bodies it reads. */
const readers: Record<string, { read: (c: Context) => Promise<unknown>; bodies: Record<string, Body> }> = {
  'c.req.formData()': { read: (c) => c.req.formData(), bodies: forms },
  'c.req.parseBody()': { read: (c) => c.req.parseBody(), bodies: forms },
  'c.req.text()': { read: (c) => c.req.text(), bodies: { ...forms, json } },
  'c.req.json()': { read: (c) => c.req.json(), bodies: { json } },
  'c.req.blob()': { read: (c) => c.req.blob(), bodies: { ...forms, json } },
  'c.req.arrayBuffer()': { read: (c) => c.req.arrayBuffer(), bodies: { ...forms, json } },
  'the parsed JSON kept as bodyCache.json (as older Hono kept c.req.json())': {
    read: keepParsedJson,
    bodies: { json },
  },
  nothing: { read: async () => undefined, bodies: { ...forms, json } },
};

/** What `c.req.json()` left in the cache of an older Hono: the parsed value alone, the body consumed. */
async function keepParsedJson(c: Context): Promise<void> {
  const cache = c.req.bodyCache as Record<string, unknown>;
  cache.json = c.req.raw.json();
  await cache.json;
}

function appWith(read: (c: Context) => Promise<unknown>) {
  const app = new Hono<IdempotencyEnv>();
  app.use(async (c, next) => {
    await read(c);
    await next();
  });
  app.use(idempotency({ store: createMemoryStore() }));
  let runs = 0;
  app.post('/orders', async (c) => {
    const type = c.req.header('content-type') ?? '';
    const body = type.startsWith('application/json') ? await c.req.json() : await c.req.parseBody();
    return c.json({ order: ++runs, item: (body as { item: string }).item }, 201);
  });
  return { app, runs: () => runs };
}

const send = (app: Hono<IdempotencyEnv>, key: string, type: string, body: string) =>
  app.request('/orders', {
    method: 'POST',
    headers: { 'content-type': type, 'idempotency-key': key },
    body: new TextEncoder().encode(body),
  });

describe('a body an earlier middleware read through Hono’s reader', () => {
  for (const [reader, { read, bodies }] of Object.entries(readers)) {
    for (const [kind, body] of Object.entries(bodies)) {
      test(`${reader}, ${kind}: the identical retry is a replay, another body a reused key`, async () => {
        const { app, runs } = appWith(read);
        const key = v7();
        const first = await send(app, key, body.type, body.same);
        const firstBody = await first.text();
        expect(first.status).toBe(201);
        const retry = await send(app, key, body.type, body.same); // the same bytes, headers and key
        expect([retry.status, retry.headers.get('idempotent-replayed'), await retry.text()]).toEqual([
          201,
          'true',
          firstBody,
        ]);
        const other = await send(app, key, body.type, body.other);
        expect([other.status, ((await other.json()) as { error: { code: string } }).error.code]).toEqual([
          422,
          'IDEMPOTENCY_KEY_REUSED',
        ]);
        expect(runs()).toBe(1);
      });
    }
  }

  test('a form validator mounted before: the identical retry is a replay', async () => {
    const app = new Hono<IdempotencyEnv>();
    let runs = 0;
    app.post(
      '/orders',
      validator('form', (value) => value),
      idempotency({ store: createMemoryStore() }),
      (c) => c.json({ order: ++runs, item: c.req.valid('form').item }, 201),
    );
    const key = v7();
    for (const body of [forms.multipart, forms.multipart] as Body[]) {
      expect((await send(app, key, body.type, body.same)).status).toBe(201);
    }
    expect(runs).toBe(1);
  });

  test('the parsed JSON alone kept: hashed as the parsed value, never as JSON.stringify made it again (`1e400` is not `null`)', async () => {
    const { app, runs } = appWith(keepParsedJson);
    const key = v7();
    expect((await send(app, key, json.type, '{"item":"book","n":1e400}')).status).toBe(201);
    const other = await send(app, key, json.type, '{"item":"book","n":null}');
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(runs()).toBe(1);
  });

  test('c.req.formData() before, urlencoded: a form is the entries it parses to (`+` and `%20` are one space)', async () => {
    const { app, runs } = appWith((c) => c.req.formData());
    const key = v7();
    expect((await send(app, key, URLENCODED, 'item=blue+book&qty=1')).status).toBe(201);
    const spelled = await send(app, key, URLENCODED, 'item=blue%20book&qty=1');
    expect([spelled.status, spelled.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    // The order of the entries is the form's: another order is another request.
    expect((await send(app, key, URLENCODED, 'qty=1&item=blue+book')).status).toBe(422);
    expect(runs()).toBe(1);
  });
});
