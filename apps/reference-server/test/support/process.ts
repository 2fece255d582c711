import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const serverDir = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  readonly child: ChildProcess;
  /** Every line written to stdout so far (and stderr's, in `errors`). */
  readonly lines: string[];
  readonly errors: string[];
  /** Resolves with the URL once the start line is out. */
  readonly url: Promise<string>;
  /** Resolves once `count` lines match `pattern` (rejects after `timeoutMs`). */
  waitFor(pattern: RegExp, count?: number, timeoutMs?: number): Promise<string[]>;
  stop(): Promise<void>;
}

/**
 * Spawn the server process as `pnpm start` runs its build, from its source (`src/main.ts` under tsx), with
 * `env` alone besides PATH and HOME (which `env` may set); stdout and stderr are pipes.
 */
export function spawnServer(env: Record<string, string>) {
  // REFERENCE_SERVER_ENTRY: another entry (an older checkout's), to see a suite fail before a fix.
  const entry = process.env.REFERENCE_SERVER_ENTRY ?? 'src/main.ts';
  return spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: serverDir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Start `src/main.ts` as the tests start nodes (tsx), with `env` alone (and PATH/HOME). */
export function startServerProcess(env: Record<string, string>): ServerProcess {
  const child = spawnServer({ HOST: '127.0.0.1', PORT: '0', ...env });
  const lines: string[] = [];
  const errors: string[] = [];
  const waiters = new Set<() => void>();
  const collect = (into: string[]) => {
    let pending = '';
    return (chunk: Buffer) => {
      pending += String(chunk);
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      into.push(...parts);
      for (const wake of waiters) wake();
    };
  };
  child.stdout?.on('data', collect(lines));
  child.stderr?.on('data', collect(errors));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waitFor = (pattern: RegExp, count = 1, timeoutMs = 20_000) =>
    new Promise<string[]>((resolve, reject) => {
      const check = () => {
        const found = lines.filter((line) => pattern.test(line));
        if (found.length < count) return false;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${count} lines matching ${pattern}:\n${[...lines, ...errors].join('\n')}`));
      }, timeoutMs);
      if (!check()) waiters.add(check);
    });
  const url = waitFor(/Server listening at http:\/\/127\.0\.0\.1:\d+/).then(
    (found) => /(http:\/\/127\.0\.0\.1:\d+)/.exec(found[0] as string)?.[1] as string,
  );
  url.catch(() => {});
  return {
    child,
    lines,
    errors,
    url,
    waitFor,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
