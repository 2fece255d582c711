import { logText } from '../observability/log-text.js';
import { redactedText } from '../setting-error.js';

/** Where a database URL points, for a message: its database, user, and host:port (defaults filled in). */
export interface DatabaseTarget {
  readonly kind: 'PostgreSQL' | 'MySQL/MariaDB' | 'SQLite';
  readonly database: string;
  readonly user: string;
  /** `host:port`, or the SQLite file. */
  readonly where: string;
}

const clean = (text: string) => {
  let decoded = text;
  try {
    decoded = decodeURIComponent(text);
  } catch {}
  // Names come from the operator's URL, yet a log line is no place for control characters.
  return logText(decoded);
};

/** What `url` names, without its password. */
export function databaseTarget(url: string): DatabaseTarget {
  const postgres = /^postgres(ql)?:\/\//i.test(url);
  if (!postgres && !/^mysql:\/\//i.test(url))
    return { kind: 'SQLite', database: clean(url.replace(/^(sqlite|file):/i, '')), user: '', where: '' };
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {}
  const port = parsed?.port || (postgres ? '5432' : '3306');
  const host = parsed?.hostname || 'localhost';
  return {
    kind: postgres ? 'PostgreSQL' : 'MySQL/MariaDB',
    database: clean(parsed?.pathname.replace(/^\//, '') ?? '?'),
    user: clean(parsed?.username || (postgres ? 'postgres' : 'root')),
    where: `${clean(host)}:${port}`,
  };
}

interface DriverError {
  readonly code?: unknown;
  readonly errno?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
}

/** The errors of a chain, outermost first (Drizzle wraps the driver's as its `cause`). */
function chainOf(error: unknown): DriverError[] {
  const chain: DriverError[] = [];
  for (
    let at = error;
    typeof at === 'object' && at !== null && chain.length < 8;
    at = (at as DriverError).cause
  )
    chain.push(at as DriverError);
  return chain;
}

/**
 * Why the database at `url` could not be opened, in one short line that names the cause, the database and the
 * host: never the SQL that was running (Drizzle's message holds the CREATE TABLE text), a stack or a password.
 * E.g. `database newcomer_ref does not exist on 127.0.0.1:5432 (create it first: createdb -h 127.0.0.1 -p 5432
 * -U postgres newcomer_ref)`.
 */
export function whyUnreachable(error: unknown, url: string): string {
  const target = databaseTarget(url);
  const [host, port] = [target.where.replace(/:\d+$/, ''), target.where.replace(/^.*:/, '')];
  const chain = chainOf(error);
  const codes = new Set(
    chain
      .flatMap((e) => [e.code, e.errno])
      .filter((c) => c !== undefined)
      .map(String),
  );
  const has = (...wanted: string[]) => wanted.some((code) => codes.has(code));
  const on = `on ${target.where}`;
  if (has('3D000', 'ER_BAD_DB_ERROR', '1049')) {
    const create =
      target.kind === 'PostgreSQL'
        ? `createdb -h ${host} -p ${port} -U ${target.user} ${target.database}`
        : `mysql -h ${host} -P ${port} -u ${target.user} -e 'CREATE DATABASE ${target.database}'`;
    return `database ${target.database} does not exist ${on} (create it first: ${create})`;
  }
  if (has('28P01', '28000', 'ER_ACCESS_DENIED_ERROR', '1045', 'ER_ACCESS_DENIED_NO_PASSWORD_ERROR', '1698'))
    return `authentication failed for user ${target.user} ${on} (wrong password, or no such user)`;
  if (has('ER_DBACCESS_DENIED_ERROR', '1044', '42501'))
    return `user ${target.user} may not use database ${target.database} ${on}`;
  if (has('ECONNREFUSED'))
    return `connection refused by ${target.where} (is the ${target.kind} server running?)`;
  if (has('ENOTFOUND')) return `unknown host ${host} (DNS found no address for it)`;
  if (has('EAI_AGAIN')) return `host ${host} could not be looked up just now (DNS did not answer)`;
  if (has('ETIMEDOUT', 'ECONNABORTED')) return `no answer from ${target.where} in time`;
  if (has('EHOSTUNREACH', 'ENETUNREACH')) return `${target.where} cannot be reached from here (no route)`;
  if (has('ECONNRESET', 'PROTOCOL_CONNECTION_LOST', 'EPIPE')) return `${target.where} closed the connection`;
  if (has('57P03', 'ER_CON_COUNT_ERROR', '53300')) return `${target.kind} ${on} accepts no connection now`;
  // Anything else: the driver's own first line, from the innermost error (the outer ones carry the SQL).
  const innermost = chain.at(-1);
  const first = String(innermost?.message ?? error)
    .split('\n', 1)[0]
    ?.replace(/^Failed query:.*/s, 'a statement failed');
  const code = innermost?.code === undefined ? '' : ` (${String(innermost.code)})`;
  const where = target.kind === 'SQLite' ? `SQLite file ${target.database}` : `${target.database} ${on}`;
  return `${redactedText(logText(`${first}${code}`.slice(0, 200)))} (${where})`;
}
