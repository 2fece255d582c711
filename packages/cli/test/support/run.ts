import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The built `idem` binary. */
export const BIN = fileURLToPath(new URL('../../dist/bin.js', import.meta.url));

/** What one run of the binary did: its exit code, its output, how long it took. */
export interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** Run the built binary as an operator would: a child process, with only PATH and `env` in its environment. */
export function idem(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Ran> {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run pnpm build first`);
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr, ms: performance.now() - started });
      },
    );
  });
}
