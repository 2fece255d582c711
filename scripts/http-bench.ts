import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import autocannon from 'autocannon';
import { v7 } from 'uuid';

/** A fresh UUIDv7 key, as a client mints one. */
export const uuidv7 = (): string => v7();

// Where taskset exists, the server gets core 0 and this process (the load generator) core 1, so that the two
// do not steal each other's time.
const pinned = existsSync('/usr/bin/taskset');
if (pinned) spawnSync('/usr/bin/taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });

/** Start `tsx <script> <variant>` in its own process (pinned to its own core), wait for the port it prints. */
export async function startServer(
  script: string,
  variant: string,
): Promise<{ url: string; child: ChildProcess }> {
  const command = [process.execPath, '--import', 'tsx', script, variant];
  const child = pinned
    ? spawn('/usr/bin/taskset', ['-c', '0', ...command], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(process.execPath, command.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (data: Buffer) => resolve(data.toString().trim()));
    child.once('exit', (code) => reject(new Error(`server ${variant} exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

/** Requests per second of POST /orders with a JSON body; `key` chooses the Idempotency-Key per request. */
export async function load(url: string, key: (() => string) | undefined, seconds: number): Promise<number> {
  const result = await autocannon({
    url: `${url}/orders`,
    method: 'POST',
    connections: 16,
    duration: seconds,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ item: 'book', quantity: 1 }),
    requests: [
      {
        setupRequest: (request) =>
          key === undefined
            ? request
            : { ...request, headers: { ...request.headers, 'idempotency-key': key() } },
        // (The plain servers get keys too, ignored: the client then does the same work in every run.)
      },
    ],
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${result.non2xx} non-2xx answers and ${result.errors} errors`);
  }
  return result.requests.average;
}

/** Measure each variant in turn (warm-up, then the measured run), each in a fresh server process. */
export async function measureServers(
  script: string,
  runs: Record<string, { variant: string; key?: () => string }>,
  seconds: number,
): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  for (const [name, run] of Object.entries(runs)) {
    const { url, child } = await startServer(script, run.variant);
    try {
      await load(url, run.key, 1);
      results[name] = await load(url, run.key, seconds);
    } finally {
      child.kill();
    }
  }
  return results;
}

/**
 * The standard comparison of an adapter benchmark, in one run: the bare server (measured first and last, and
 * averaged, so that drift hits both sides), the server with idem on unique keys, idem replaying one key, and
 * any `extra` runs. Returns requests per second by name, `plain` being the averaged bare figure.
 */
export async function compareWithBare(
  script: string,
  extra: Record<string, { variant: string; key?: () => string }>,
  seconds: number,
): Promise<Record<string, number> & { plain: number; idem: number; replay: number }> {
  const replayKey = uuidv7();
  const r = await measureServers(
    script,
    {
      plain: { variant: 'plain', key: uuidv7 },
      idem: { variant: 'idem', key: uuidv7 },
      replay: { variant: 'idem', key: () => replayKey },
      ...extra,
      plainAgain: { variant: 'plain', key: uuidv7 },
    },
    seconds,
  );
  return {
    ...r,
    plain: ((r.plain as number) + (r.plainAgain as number)) / 2,
    idem: r.idem as number,
    replay: r.replay as number,
  };
}
