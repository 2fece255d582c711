import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import { loggerOptions, readableLogs } from '../src/observability/logger.js';

/** A stdout stand-in: a terminal or not, and what was written to it. */
function terminal(isTTY: boolean) {
  const written: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk, _encoding, done) {
        written.push(String(chunk));
        done();
      },
    }),
    { isTTY },
  );
  return { stream, written };
}

async function logOneLine(env: Record<string, string>, isTTY: boolean): Promise<string> {
  const { stream, written } = terminal(isTTY);
  const app = Fastify({ logger: loggerOptions(loadConfig({ LOG_LEVEL: 'info', ...env }), stream) });
  app.log.info({ namespace: 'sales' }, 'namespace created');
  await app.close();
  await new Promise((resolve) => setTimeout(resolve, 20));
  return written.join('');
}

describe('human-facing logs', () => {
  test('on a terminal: readable lines (pino-pretty), not JSON', async () => {
    const text = await logOneLine({}, true);
    expect(text).toContain('namespace created');
    expect(text).toMatch(/INFO/);
    expect(text).not.toMatch(/^\{"level"/m);
  });

  test('not a terminal (a pipe, a file, a log shipper): one JSON object a line', async () => {
    const text = await logOneLine({}, false);
    const lines = text.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      level: 30,
      msg: 'namespace created',
      namespace: 'sales',
    });
  });

  test('LOG_FORMAT overrides the guess either way; an unknown format stops the server at startup', () => {
    const config = (format: string) => loadConfig({ LOG_FORMAT: format });
    expect(readableLogs(config('json'), { isTTY: true })).toBe(false);
    expect(readableLogs(config('pretty'), { isTTY: false })).toBe(true);
    expect(readableLogs(config('auto'), { isTTY: true })).toBe(true);
    expect(readableLogs(config(''), {})).toBe(false);
    expect(() => config('xml')).toThrow(/LOG_FORMAT must be one of auto, json, pretty/);
  });
});
