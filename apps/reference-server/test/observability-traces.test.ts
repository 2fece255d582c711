import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { afterEach, describe, expect, test } from 'vitest';
import { tracesWanted } from '../src/observability/settings.js';
import { startObservedNode } from './support/observed.js';
import { spawnServer } from './support/process.js';
import { call, newKey } from './support/server.js';

/** What an OTLP/HTTP collector received. */
interface Export {
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
}

/** A stand-in OTLP/HTTP collector on a loopback address: it records each export and answers 200. */
async function collector(host: string, port: number, into: Export[]): Promise<Server> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      into.push({
        path: request.url ?? '',
        contentType: request.headers['content-type'] ?? '',
        body: Buffer.concat(chunks),
      });
      response.writeHead(200, { 'content-type': request.headers['content-type'] ?? 'application/json' });
      response.end(request.headers['content-type']?.includes('json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

const running: { child?: ChildProcess | undefined; servers: Server[]; dirs: string[] } = {
  servers: [],
  dirs: [],
};
afterEach(async () => {
  running.child?.kill('SIGKILL');
  running.child = undefined;
  for (const server of running.servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const dir of running.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * Run the real server process (src/main.ts, as `pnpm start` runs its build) with exactly `env` besides its
 * own settings, and return its URL once it listens.
 */
async function startProcess(
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess; stdout: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-traces-'));
  running.dirs.push(dir);
  const child = spawnServer({
    HOME: process.env.HOME ?? dir,
    DATABASE_URL: 'sqlite::memory:',
    WAREHOUSE: join(dir, 'warehouse'),
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    IDEMPOTENCY_PURGE_ENABLED: 'false',
    ...env,
  });
  running.child = child;
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(String(chunk)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start: ${stderr.join('')}`)), 25_000);
    child.once('exit', (code) => reject(new Error(`the server exited (${code}): ${stderr.join('')}`)));
    let pending = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      pending += String(chunk);
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        stdout.push(line);
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (match) {
          clearTimeout(timer);
          resolve(match[1] as string);
        }
      }
    });
  });
  return { url, child, stdout };
}

/** SIGTERM, as an orchestrator stops it: the server closes and flushes its spans. */
async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const code = await exited;
  running.child = undefined;
  return code;
}

/** A keyed create, then its retry: one executed and one replayed request. */
async function executedAndReplayed(url: string, traceparent?: string) {
  const key = newKey();
  const headers = traceparent === undefined ? {} : { traceparent };
  const send = () =>
    fetch(`${url}/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
      body: JSON.stringify({ namespace: ['traced'] }),
    });
  expect((await send()).status).toBe(200);
  const replay = await send();
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
}

interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes: { key: string; value: Record<string, unknown> }[];
}

function spansOf(exports: readonly Export[]) {
  const spans: OtlpSpan[] = [];
  const resources: Record<string, unknown>[] = [];
  for (const { body } of exports) {
    const data = JSON.parse(body.toString()) as {
      resourceSpans: {
        resource: { attributes: OtlpSpan['attributes'] };
        scopeSpans: { spans: OtlpSpan[] }[];
      }[];
    };
    for (const resourceSpan of data.resourceSpans) {
      resources.push(
        Object.fromEntries(resourceSpan.resource.attributes.map((a) => [a.key, Object.values(a.value)[0]])),
      );
      for (const scope of resourceSpan.scopeSpans) spans.push(...scope.spans);
    }
  }
  return { spans, resources };
}

const attribute = (span: OtlpSpan | undefined, key: string) => {
  const found = span?.attributes.find((a) => a.key === key);
  return found === undefined ? undefined : Object.values(found.value)[0];
};

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

describe('OTLP trace export of the server process', () => {
  test('with OTEL_EXPORTER_OTLP_ENDPOINT set, the spans of an executed and a replayed request reach the collector', async () => {
    const received: Export[] = [];
    const server = await collector('127.0.0.1', 0, received);
    running.servers.push(server);
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const { url, child } = await startProcess({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await executedAndReplayed(url, `00-${traceId}-00f067aa0ba902b7-01`);
    expect(await stop(child)).toBe(0);

    expect(received.length).toBeGreaterThan(0);
    expect(received.every((e) => e.path === '/v1/traces' && e.contentType.includes('json'))).toBe(true);
    const { spans, resources } = spansOf(received);
    expect(resources[0]).toMatchObject({ 'service.name': 'idem-reference-server' });
    const named = (name: string) => spans.filter((span) => span.name === name);
    expect(named('POST /v1/namespaces')).toHaveLength(2);
    expect(named('idempotency.validate')).toHaveLength(2);
    expect(named('idempotency.create')).toHaveLength(1);
    expect(named('idempotency.lookup')).toHaveLength(1);
    expect(named('idempotency.process')).toHaveLength(1);

    // Every span of both requests is in the caller's trace; idem's spans are children of the server span.
    expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([traceId]));
    const [first, second] = named('POST /v1/namespaces').sort((a, b) =>
      String(attribute(a, 'http.route')).localeCompare(String(attribute(b, 'http.route'))),
    );
    const serverIds = new Set([first?.spanId, second?.spanId]);
    for (const span of [...named('idempotency.validate'), ...named('idempotency.process')]) {
      expect(serverIds.has(span.parentSpanId)).toBe(true);
    }
    const duplicate = named('idempotency.validate').map((span) => attribute(span, 'is_duplicate_request'));
    expect(duplicate.sort()).toEqual([false, true]);
    expect(attribute(named('idempotency.process')[0], 'http.response.status_code')).toBe(200);
    expect(JSON.stringify(spans)).not.toContain('traced'); // no body, no path values
  }, 60_000);

  test('with no OTEL_* exporter variable, nothing is exported, even to the default collector address', async () => {
    const received: Export[] = [];
    running.servers.push(await collector('127.0.0.1', 4318, received)); // the SDK's default endpoint
    try {
      running.servers.push(await collector('::1', 4318, received));
    } catch {
      // no IPv6 loopback here: localhost is 127.0.0.1 alone
    }
    const quiet = await startProcess({ OTEL_SERVICE_NAME: 'not-an-exporter-setting' });
    await executedAndReplayed(quiet.url);
    expect(await stop(quiet.child)).toBe(0);
    expect(received).toEqual([]);

    // The control: the same collector receives the export once a variable asks for one (default endpoint and
    // protocol, http/protobuf), so the silence above is the server's doing.
    const loud = await startProcess({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_BSP_SCHEDULE_DELAY: '100' });
    await executedAndReplayed(loud.url);
    expect(await stop(loud.child)).toBe(0);
    await until(() => received.length > 0, 2_000);
    expect(received.map((e) => e.path)).toContain('/v1/traces');
    const body = Buffer.concat(received.map((e) => e.body)).toString('latin1');
    expect(body).toContain('idempotency.validate');
    expect(body).toContain('idempotency.process');
  }, 90_000);
});

describe('tracing settings', () => {
  test('the standard variables decide; nothing set means no export', () => {
    expect(tracesWanted({})).toBe(false);
    expect(tracesWanted({ OTEL_SERVICE_NAME: 'catalog' })).toBe(false);
    expect(tracesWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracesWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(
      true,
    );
    expect(tracesWanted({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracesWanted({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(
      false,
    );
    expect(tracesWanted({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(
      false,
    );
    expect(tracesWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBe(false);
  });

  test('a server built without them registers no tracer: spans are the API no-ops', async () => {
    const node = await startObservedNode();
    try {
      expect(
        (await call(node.url, 'POST', '/v1/namespaces', { key: newKey(), body: { namespace: ['n'] } }))
          .status,
      ).toBe(200);
      expect(trace.getTracer('probe').startSpan('probe').isRecording()).toBe(false);
    } finally {
      await node.close();
    }
  });
});
