import type { ServerResponse } from 'node:http';
import type { CapturedResponse, HeaderValue } from '@idem/core';

type Chunk = string | Uint8Array | null | undefined;

function toBuffer(chunk: Chunk, encoding: unknown): Buffer | undefined {
  if (chunk === null || chunk === undefined) return undefined;
  if (typeof chunk === 'string')
    return Buffer.from(chunk, (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding);
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/**
 * Record what a handler writes, where it is really written: `writeHead`, `write` and `end`, and so everything
 * built on them (`res.json`, `res.send`, `res.sendFile`, piped streams). Bytes are kept up to `maxBodyBytes`;
 * beyond that only the fact that the body was too large. Returns a function that snapshots the response.
 */
export function captureResponse(res: ServerResponse, maxBodyBytes: number): () => CapturedResponse {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  // Headers handed straight to writeHead are not always visible through getHeaders().
  let headHeaders: Record<string, HeaderValue> = {};

  const keep = (chunk: Chunk, encoding: unknown): void => {
    if (truncated) return;
    const buffer = toBuffer(chunk, encoding);
    if (buffer === undefined || buffer.length === 0) return;
    size += buffer.length;
    if (size > maxBodyBytes) {
      truncated = true;
      chunks.length = 0;
      return;
    }
    chunks.push(buffer);
  };

  const { writeHead, write, end } = res;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const headers = args.find((arg, i) => i > 0 && typeof arg === 'object' && arg !== null);
    if (Array.isArray(headers)) {
      // The raw form: [name, value, name, value, …]
      for (let i = 0; i + 1 < headers.length; i += 2)
        headHeaders[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
    } else if (headers !== undefined) {
      headHeaders = { ...headHeaders, ...(headers as Record<string, HeaderValue>) };
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof res.writeHead;
  res.write = function (this: ServerResponse, chunk: Chunk, ...rest: unknown[]) {
    keep(chunk, rest[0]);
    return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof res.write;
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    if (typeof chunk !== 'function') keep(chunk as Chunk, rest[0]);
    return (end as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as typeof res.end;

  return () => ({
    status: res.statusCode,
    headers: { ...headHeaders, ...(res.getHeaders() as Record<string, HeaderValue>) },
    body: truncated ? null : Buffer.concat(chunks),
    bodyTruncated: truncated,
  });
}
