import { createGunzip } from 'node:zlib';
import type { preParsingAsyncHookHandler } from 'fastify';

/**
 * Decompression the way a compression plugin does it, for an app-wide `preParsing` hook (so it runs before the
 * plugin's). Fastify checks `Content-Length` against the bytes off the wire, which the stream it gets counts.
 */
export const gunzipBody: preParsingAsyncHookHandler = async (request, _reply, payload) => {
  if (request.headers['content-encoding'] !== 'gzip') return payload;
  const gunzip = Object.assign(createGunzip(), { receivedEncodedLength: 0 });
  payload.on('data', (chunk: Buffer) => {
    gunzip.receivedEncodedLength += chunk.length;
  });
  return payload.pipe(gunzip);
};
