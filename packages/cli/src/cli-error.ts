/**
 * What the `idem` command's exit code says, for scripts:
 * `0` done, `1` the store failed or could not be reached, `2` a usage error (bad arguments, an unknown URL
 * scheme), `3` no record for that key, `4` refused (an in-flight record without `--force`, a forget nobody
 * confirmed).
 */
export const ExitCode = {
  Ok: 0,
  Failed: 1,
  Usage: 2,
  NotFound: 3,
  Refused: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** An outcome the command reports as one line and an exit code, never a stack trace. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
