import { Readable } from 'node:stream';
import { callOutcome, createIdempotentFetch, isReplay } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { form, streamOf } from './support/bodies.js';
import { fast } from './support/fake-fetch.js';
import { type Arrival, throughLossyProxy } from './support/idempotent-server.js';

/** A request body, as fetch takes it (`BodyInit`, which Node's types do not declare globally). */
type Body = NonNullable<RequestInit['body']>;

const encoder = new TextEncoder();

async function* generated(...chunks: string[]) {
  for (const chunk of chunks) yield encoder.encode(chunk);
}

/** What the server reads out of an arrival: its text, or the fields of a form as a server parses them. */
type Content = { readonly text: string } | { readonly fields: readonly unknown[] } | 'opaque';

interface BodyCase {
  readonly name: string;
  /** The call's `input` and `init`, against the proxy at `url`. */
  readonly call: (url: string) => [string | Request, RequestInit | undefined];
  /** The content type every arrival carries (as plain fetch would send it); `undefined` for none. */
  readonly contentType: string | RegExp | undefined;
  readonly content: Content;
}

async function contentOf(arrival: Arrival, kind: Content): Promise<Content> {
  if (kind === 'opaque') return 'opaque';
  if ('text' in kind) return { text: arrival.body.toString() };
  const parsed = await new Response(arrival.body, {
    headers: { 'content-type': arrival.contentType ?? '' },
  }).formData();
  const fields = await Promise.all(
    [...parsed].map(async ([name, value]) =>
      typeof value === 'string'
        ? [name, value]
        : [name, { file: value.name, type: value.type, text: await value.text() }],
    ),
  );
  return { fields };
}

const post = (body: NonNullable<RequestInit['body']>, extra: RequestInit = {}): RequestInit => ({
  method: 'POST',
  body,
  ...extra,
});
const MULTIPART = /^multipart\/form-data; boundary=\S+$/;

const cases: BodyCase[] = [
  {
    name: 'FormData of text fields',
    call: (url) => [`${url}/orders`, post(form(['item', 'book'], ['qty', '2']))],
    contentType: MULTIPART,
    content: {
      fields: [
        ['item', 'book'],
        ['qty', '2'],
      ],
    },
  },
  {
    name: 'FormData with a File',
    call: (url) => [
      `${url}/uploads`,
      post(form(['note', 'été'], ['file', new File(['a,b\n1,2\n'], 'rows.csv', { type: 'text/csv' })])),
    ],
    contentType: MULTIPART,
    content: {
      fields: [
        ['note', 'été'],
        ['file', { file: 'rows.csv', type: 'text/csv', text: 'a,b\n1,2\n' }],
      ],
    },
  },
  {
    name: 'an empty FormData',
    call: (url) => [`${url}/orders`, post(new FormData())],
    contentType: MULTIPART,
    content: 'opaque',
  },
  {
    name: "FormData with the caller's own content-type (kept, as fetch keeps it)",
    call: (url) => [
      `${url}/orders`,
      post(form(['item', 'book']), { headers: { 'content-type': 'multipart/form-data' } }),
    ],
    contentType: 'multipart/form-data',
    content: 'opaque',
  },
  {
    name: 'a Request whose body is FormData',
    call: (url) => [new Request(`${url}/orders`, post(form(['item', 'pen']))), undefined],
    contentType: MULTIPART,
    content: { fields: [['item', 'pen']] },
  },
  {
    name: 'URLSearchParams',
    call: (url) => [`${url}/orders`, post(new URLSearchParams({ item: 'book', note: 'été & co' }))],
    contentType: 'application/x-www-form-urlencoded;charset=UTF-8',
    content: { text: 'item=book&note=%C3%A9t%C3%A9+%26+co' },
  },
  {
    name: 'a Blob with a type',
    call: (url) => [`${url}/uploads`, post(new Blob(['a,b\n', '1,2\n'], { type: 'text/csv' }))],
    contentType: 'text/csv',
    content: { text: 'a,b\n1,2\n' },
  },
  {
    name: 'a Blob without a type',
    call: (url) => [`${url}/uploads`, post(new Blob(['raw ', 'bytes']))],
    contentType: undefined,
    content: { text: 'raw bytes' },
  },
  {
    name: 'a ReadableStream',
    call: (url) => [
      `${url}/uploads`,
      post(streamOf('chunk-1,', 'chunk-2'), {
        duplex: 'half',
        headers: { 'content-type': 'application/octet-stream' },
      } as RequestInit),
    ],
    contentType: 'application/octet-stream',
    content: { text: 'chunk-1,chunk-2' },
  },
  {
    name: 'a Node Readable',
    call: (url) => [
      `${url}/uploads`,
      post(Readable.from(['x', 'y', 'z']) as unknown as Body, { duplex: 'half' } as RequestInit),
    ],
    contentType: undefined,
    content: { text: 'xyz' },
  },
  {
    name: 'an async generator',
    call: (url) => [
      `${url}/uploads`,
      post(generated('g1', 'g2') as unknown as Body, { duplex: 'half' } as RequestInit),
    ],
    contentType: undefined,
    content: { text: 'g1g2' },
  },
];

describe('every body kind, retried through the lossy proxy, arrives byte-identical on every attempt', () => {
  // Two answers dropped after the server executed, one reset before forwarding and one proxy 503: three
  // arrivals, of which only the first may run the handler.
  const script = ['dropAnswer', 'resetBeforeForward', 'answer503', 'dropAnswer', 'deliver'] as const;

  test.each(cases)('$name: the handler runs once, the retries are replays', async (row) => {
    await throughLossyProxy(script, async (url, server) => {
      const [input, init] = row.call(url);
      const response = await createIdempotentFetch({ ...fast, maxAttempts: 10 })(input, init);
      expect(response.status).toBe(201);
      expect(isReplay(response)).toBe(true);
      expect(await response.json()).toEqual({ execution: 1 });
      expect(callOutcome(response)).toMatchObject({ attempts: 5, replayed: true });
      expect(server.executions()).toBe(1);

      const arrivals = server.arrivals;
      expect(arrivals).toHaveLength(3);
      const [first] = arrivals as [Arrival];
      for (const arrival of arrivals) {
        expect(arrival.key).toBe(first.key);
        expect(arrival.contentType).toBe(first.contentType);
        expect(arrival.body.equals(first.body)).toBe(true);
      }
      if (row.contentType instanceof RegExp) expect(first.contentType).toMatch(row.contentType);
      else expect(first.contentType).toBe(row.contentType);
      expect(await contentOf(first, row.content)).toEqual(row.content);
    });
  });
});
