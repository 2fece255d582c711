import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { AppResponse, Business } from './business.js';

// The suite's routes answered the Web-standard way, for the test apps of Web adapters (a Hono app, a bare fetch
// handler): a handler answers by returning a `Response`, and what fails after that is its body stream.

/** Statuses whose response cannot have a body. */
const NULL_BODY = new Set([204, 205, 304]);
const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A handler's answer as a `Response`. */
export const webResponse = (answer: AppResponse): Response =>
  new Response(NULL_BODY.has(answer.status) ? null : new Uint8Array(answer.body), {
    status: answer.status,
    headers: answer.headers,
  });

/** A streamed 200 text/plain answer of `chunks`, failing where their iterable throws. */
export const streamedResponse = (chunks: AsyncIterable<string>): Response =>
  new Response(
    ReadableStream.from(
      (async function* () {
        for await (const chunk of chunks) yield encoder.encode(chunk);
      })(),
    ),
    { status: 200, headers: { 'content-type': 'text/plain' } },
  );

/** `POST /late/:ms`: the status goes out with the Response, the body `ms` later. */
export function lateResponse(business: Business, ms: number): Response {
  const text = business.late(ms);
  return streamedResponse(
    (async function* () {
      yield await text;
    })(),
  );
}

/** `POST /throw-after/:point`: a Web handler cannot throw once it returned, so its body fails after the point. */
export function throwAfterResponse(business: Business, point: string): Response {
  const run = business.throwAfter(point);
  return streamedResponse(
    (async function* () {
      if (run.point !== 'status') yield 'first,';
      if (run.point === 'end') {
        yield 'end';
        return;
      }
      await sleep(20);
      run.fail();
    })(),
  );
}

/** `POST /destroy`: an answer broken off before any byte (its body fails at once). */
export function brokenResponse(business: Business): Response {
  business.destroy();
  return new Response(
    new ReadableStream({
      start: (controller) => void setTimeout(() => controller.error(new Error('broken off')), 10),
    }),
  );
}

/** Serve a fetch handler on a free port of 127.0.0.1 with `@hono/node-server`. */
export async function serveFetch(
  fetch: (request: Request) => Response | Promise<Response>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const started = serve({ fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
