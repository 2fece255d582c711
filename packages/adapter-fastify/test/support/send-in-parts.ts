import { request as httpRequest } from 'node:http';

/** What a POST sent in parts was answered. */
export interface PartedAnswer {
  readonly status: number;
  readonly body: string;
  readonly replayed: string | undefined;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A keyed POST whose body goes out in `parts`, `gapMs` apart, on a fresh connection: with a `Content-Length`
 * of the whole unless the headers ask for chunked transfer encoding.
 */
export function sendInParts(
  port: number,
  key: string,
  parts: readonly (string | Buffer)[],
  {
    headers = {},
    gapMs = 0,
    path = '/orders',
  }: { headers?: Record<string, string>; gapMs?: number; path?: string } = {},
): Promise<PartedAnswer> {
  const length = parts.reduce((sum, part) => sum + Buffer.byteLength(part), 0);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        headers: {
          'idempotency-key': key,
          ...(headers['transfer-encoding'] === undefined ? { 'content-length': String(length) } : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            replayed: res.headers['idempotent-replayed'] as string | undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    (async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0 && gapMs > 0) await delay(gapMs);
        req.write(part);
      }
      req.end();
    })().catch(reject);
  });
}
