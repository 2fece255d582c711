import { isStoreLimitError } from '@idem/core';
import { CliError, ExitCode } from './cli-error.js';
import { isMissingTable } from './open-store.js';
import type { StoreUrl } from './store-url.js';

const BACKENDS: Record<StoreUrl['kind'], string> = {
  postgres: 'PostgreSQL',
  mysql: 'MySQL',
  sqlite: 'SQLite',
  redis: 'Redis',
  'redis-cluster': 'Redis Cluster',
};

/** Every error in `error`'s cause chain (Drizzle and the pools wrap the driver's). */
function* chain(error: unknown): Generator<{ code?: unknown; message?: unknown; errors?: unknown }> {
  for (let e: unknown = error, depth = 0; typeof e === 'object' && e !== null && depth < 10; depth++) {
    yield e as { code?: unknown; message?: unknown };
    // An AggregateError (a host that resolves to several addresses, all refused) holds the real ones.
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner) && inner.length > 0) yield* chain(inner[0]);
    e = (e as { cause?: unknown }).cause;
  }
}

const codeIn = (error: unknown, codes: readonly string[]): boolean =>
  [...chain(error)].some((e) => codes.includes(String(e.code)));
const messageMatches = (error: unknown, pattern: RegExp): boolean =>
  [...chain(error)].some((e) => typeof e.message === 'string' && pattern.test(e.message));

/**
 * One line for a failure, in the operator's terms: the server is unreachable, the credentials were refused, the
 * table is missing. A {@link CliError} is already such a line. Never a stack trace, never the URL's password
 * (the caller masks it in everything written as well).
 */
export function describeError(error: unknown, target: StoreUrl | undefined, table: string): CliError {
  if (error instanceof CliError) return error;
  const backend = target === undefined ? 'the store' : BACKENDS[target.kind];
  const where = target === undefined ? '' : ` at ${target.shown}`;
  const line = (message: string, exitCode: ExitCode = ExitCode.Failed) =>
    new CliError(message, exitCode, { cause: error });
  // A scope or key longer than the store holds: no record has it, and no retry will find one (the store refused
  // it before the database saw it).
  if (isStoreLimitError(error)) return line(error.message, ExitCode.Usage);
  if (isMissingTable(error))
    return line(`the table ${table} does not exist in this database: run \`idem migrate\` first`);
  if (codeIn(error, ['ECONNREFUSED'])) return line(`cannot reach ${backend}${where}: connection refused`);
  if (codeIn(error, ['ENOTFOUND', 'EAI_AGAIN']))
    return line(`cannot reach ${backend}${where}: the host name does not resolve`);
  // The drivers' own words for a wait that ran out, not any message with "timeout" in it (a refused
  // `statement_timeout` setting is not one).
  if (
    codeIn(error, ['ETIMEDOUT', 'ER_LOCK_WAIT_TIMEOUT']) ||
    messageMatches(
      error,
      /timed out|timeout exceeded|timeout expired|due to (connection|statement|lock) timeout|max_statement_time exceeded/i,
    )
  )
    return line(`${backend}${where} did not answer in time`);
  if (
    codeIn(error, ['28P01', '28000', 'ER_ACCESS_DENIED_ERROR']) ||
    messageMatches(error, /NOAUTH|WRONGPASS/)
  )
    return line(`${backend}${where} refused the credentials`);
  if (codeIn(error, ['3D000', 'ER_BAD_DB_ERROR'])) return line(`${backend}${where} has no such database`);
  if (messageMatches(error, /Connection is closed|connection.*(closed|ended|terminated)|ECONNRESET/i))
    return line(`${backend}${where} closed the connection`);
  if (messageMatches(error, /Failed to refresh slots cache|None of startup nodes is available/))
    return line(`cannot reach ${backend}${where}: no node of the cluster answered`);
  // The store's own refusal of an argument (a malformed cursor, a limit out of range).
  if (error instanceof RangeError) return line(error.message, ExitCode.Usage);
  const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
  return line(`${backend} failed: ${message}`);
}
