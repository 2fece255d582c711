import { isUtf8 } from 'node:buffer';
import { createInterface } from 'node:readline/promises';
import {
  type IdempotencyRecord,
  type ListedRecord,
  MAX_LIST_LIMIT,
  purgeExpiredInBatches,
  type RecordRef,
  type RecordStateAt,
  recordStateAt,
  type StoreStats,
  validateUuidV7,
} from '@idem/core';
import cliProgress from 'cli-progress';
import { CliError, ExitCode } from './cli-error.js';
import { escapeValue, shownValue } from './escape.js';
import type { OpenedStore } from './open-store.js';
import {
  type Colors,
  count,
  fields,
  humanBytes,
  humanDuration,
  humanTime,
  type Io,
  inertBody,
  stateText,
  table,
} from './output.js';

/** What every command is given: the store, the time, how to write, and how the operator wants it. */
export interface Context {
  readonly opened: OpenedStore;
  readonly nowMs: number;
  readonly json: boolean;
  readonly io: Io;
  readonly colors: Colors;
  readonly errColors: Colors;
  /** Write to stdout / stderr, credentials masked. */
  out(text: string): void;
  err(text: string): void;
}

/**
 * The key as the coordinator stores it: a UUIDv7 in lower case without the quotes of its structured-field form
 * (as a support ticket may quote it), any other key as given.
 */
export function normalizeKey(key: string): string {
  const uuid = validateUuidV7(key.trim());
  return uuid.ok ? uuid.key : key;
}

const refOf = (options: { key: string; scope: string }): RecordRef => ({
  scope: options.scope,
  key: normalizeKey(options.key),
});

/** A record's key and scope as a message names them: as `idem` shows them everywhere, the scope quoted. */
const describeRef = ({ scope, key }: RecordRef): string =>
  scope === '' ? `key ${shownValue(key)}` : `key ${shownValue(key)} in scope "${shownValue(scope)}"`;

/** A record as `--json` shows it: times as ms and ISO, the body (when read) as base64 and, if it is, UTF-8. */
function recordJson(record: IdempotencyRecord | ListedRecord, nowMs: number, withBody: boolean) {
  const iso = (ms: number) => new Date(ms).toISOString();
  const { response } = record;
  let body: { base64: string; utf8?: string } | null | undefined;
  if (withBody && response !== null && response.body !== undefined) {
    const bytes = response.body === null ? null : Buffer.from(response.body);
    body =
      bytes === null
        ? null
        : { base64: bytes.toString('base64'), ...(isUtf8(bytes) ? { utf8: bytes.toString('utf8') } : {}) };
  }
  const state = recordStateAt(record as IdempotencyRecord, nowMs);
  return {
    scope: record.scope,
    key: record.key,
    state,
    fingerprint: record.fingerprint,
    owner: record.owner,
    createdAtMs: record.createdAtMs,
    createdAt: iso(record.createdAtMs),
    expiresAtMs: record.expiresAtMs,
    expiresAt: iso(record.expiresAtMs),
    leaseUntilMs: record.leaseUntilMs,
    leaseUntil: iso(record.leaseUntilMs),
    leaseLapsed: state === 'in-flight' && record.leaseUntilMs <= nowMs,
    response:
      response === null
        ? null
        : {
            status: response.status,
            headers: response.headers,
            bodyBytes: 'bodyBytes' in response ? response.bodyBytes : (response.body?.byteLength ?? null),
            bodyOmitted: response.bodyOmitted === true,
            ...(body === undefined ? {} : { body }),
          },
  };
}

const bodyBytesOf = (record: IdempotencyRecord | ListedRecord): number | null => {
  const { response } = record;
  if (response === null) return null;
  return 'bodyBytes' in response ? response.bodyBytes : (response.body?.byteLength ?? null);
};

/** `idem inspect`: one record, whole; its body only with `--body`. */
export async function inspect(
  ctx: Context,
  options: { key: string; scope: string; body: boolean },
): Promise<ExitCode> {
  const ref = refOf(options);
  const record = await ctx.opened.store.load(ref);
  if (record === undefined) {
    if (ctx.json) ctx.out(`${JSON.stringify({ found: false, ...ref })}\n`);
    else ctx.err(`no record for ${describeRef(ref)}\n`);
    return ExitCode.NotFound;
  }
  if (ctx.json) {
    ctx.out(
      `${JSON.stringify({ found: true, record: recordJson(record, ctx.nowMs, options.body) }, null, 2)}\n`,
    );
    return ExitCode.Ok;
  }
  const { colors, nowMs } = ctx;
  const state = recordStateAt(record, nowMs);
  const rows: [string, string][] = [
    ['key', shownValue(record.key)],
    [
      'scope',
      record.scope === '' ? colors.dim(`${shownValue('')} (the default scope)`) : shownValue(record.scope),
    ],
    ['state', stateText(state, colors)],
    ['created', humanTime(record.createdAtMs, nowMs)],
    ['expires', humanTime(record.expiresAtMs, nowMs)],
    ['fingerprint', escapeValue(record.fingerprint)],
  ];
  const { response } = record;
  if (response === null) {
    const lapsed = record.leaseUntilMs <= nowMs;
    rows.push([
      'lease',
      `${humanTime(record.leaseUntilMs, nowMs)}${lapsed ? colors.red(' lapsed: the next retry takes the key over') : ''}`,
    ]);
    rows.push(['owner', escapeValue(record.owner ?? '')]);
  } else {
    rows.push(['status', String(response.status)]);
    const headers = Object.entries(response.headers).map(([name, value]) => escapeValue(`${name}: ${value}`));
    rows.push(['headers', headers.length === 0 ? colors.dim('none') : headers.join('\n')]);
    const bytes = bodyBytesOf(record);
    rows.push([
      'body',
      response.bodyOmitted === true
        ? colors.dim('not stored (larger than the body cap)')
        : bytes === null
          ? colors.dim('none')
          : `${humanBytes(bytes)}${options.body ? '' : colors.dim(' (--body prints it)')}`,
    ]);
  }
  ctx.out(`${fields(rows, colors)}\n`);
  if (options.body && response?.body) {
    const bytes = Buffer.from(response.body);
    ctx.out(
      isUtf8(bytes)
        ? `\n${inertBody(bytes.toString('utf8'))}\n`
        : `\n${colors.dim('binary, as base64:')}\n${bytes.toString('base64')}\n`,
    );
  }
  return ExitCode.Ok;
}

/** Ask on the terminal; `false` unless the answer is yes. */
async function confirm(io: Io, question: string): Promise<boolean> {
  const prompt = createInterface({ input: io.stdin, output: io.stderr, terminal: true });
  // Ctrl-C and Ctrl-D reject the question; a terminal that goes away only closes the prompt, and the question
  // would never settle. Either way the operator did not say yes.
  const unanswered = new Promise<undefined>((resolve) => prompt.once('close', () => resolve(undefined)));
  try {
    const answer = await Promise.race([prompt.question(question), unanswered]);
    if (answer === undefined) io.stderr.write('\n');
    return answer !== undefined && /^y(es)?$/i.test(answer.trim());
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ABORT_ERR') throw error;
    io.stderr.write('\n');
    return false;
  } finally {
    prompt.close();
  }
}

/** `idem forget`: delete one record, after asking; an in-flight one only with `--force`. */
export async function forget(
  ctx: Context,
  options: { key: string; scope: string; yes: boolean; force: boolean },
): Promise<ExitCode> {
  const { store } = ctx.opened;
  if (store.forget === undefined)
    throw new CliError('this store cannot forget records (it has no forget)', ExitCode.Failed);
  const ref = refOf(options);
  const record = await store.load(ref);
  if (record === undefined) {
    if (ctx.json) ctx.out(`${JSON.stringify({ forgotten: false, found: false, ...ref })}\n`);
    else ctx.err(`no record for ${describeRef(ref)}\n`);
    return ExitCode.NotFound;
  }
  const state = recordStateAt(record, ctx.nowMs);
  if (state === 'in-flight' && !options.force) {
    const lease =
      record.leaseUntilMs <= ctx.nowMs
        ? `its lease lapsed ${humanDuration(ctx.nowMs - record.leaseUntilMs)} ago (its next retry takes it over)`
        : `its handler may still be running, leased for ${humanDuration(record.leaseUntilMs - ctx.nowMs)} more, and would lose its fence`;
    throw new CliError(
      `refusing to forget ${describeRef(ref)}: it is in flight; ${lease}; --force forgets it anyway`,
      ExitCode.Refused,
    );
  }
  if (!options.yes) {
    if (ctx.io.stdin.isTTY !== true)
      throw new CliError('refusing to forget without confirmation: pass --yes', ExitCode.Refused);
    const sure = await confirm(
      ctx.io,
      `Forget the ${state} record of ${describeRef(ref)}? A retry will run again. [y/N] `,
    );
    if (!sure) throw new CliError('not forgotten', ExitCode.Refused);
    // An answer can take minutes, and the key a new life meanwhile: a retry takes an expired record or a lapsed
    // lease over, and its handler runs. What is forgotten is the record the operator was shown, or nothing.
    const now = await store.load(ref);
    if (
      now !== undefined &&
      (now.createdAtMs !== record.createdAtMs ||
        now.owner !== record.owner ||
        now.expiresAtMs !== record.expiresAtMs)
    )
      throw new CliError(
        `refusing to forget ${describeRef(ref)}: it changed while you were asked (${recordStateAt(now, Date.now())} now); run forget again`,
        ExitCode.Refused,
      );
  }
  const forgotten = await store.forget(ref);
  if (ctx.json) ctx.out(`${JSON.stringify({ forgotten, found: true, state, ...ref })}\n`);
  else if (forgotten) ctx.out(`forgot the ${state} record of ${describeRef(ref)}\n`);
  else ctx.err(`the record of ${describeRef(ref)} was gone already\n`);
  return forgotten ? ExitCode.Ok : ExitCode.NotFound;
}

/** `idem list`: up to `limit` records, a page of the store at a time. */
export async function list(
  ctx: Context,
  options: { scope?: string; state?: RecordStateAt; limit: number; cursor?: string },
): Promise<ExitCode> {
  const { store } = ctx.opened;
  if (store.list === undefined)
    throw new CliError('this store cannot list records (it has no list)', ExitCode.Failed);
  const records: ListedRecord[] = [];
  let cursor: string | null | undefined = options.cursor;
  do {
    const page = await store.list({
      limit: Math.min(MAX_LIST_LIMIT, options.limit - records.length),
      nowMs: ctx.nowMs,
      ...(options.scope === undefined ? {} : { scope: options.scope }),
      ...(options.state === undefined ? {} : { state: options.state }),
      ...(cursor === undefined ? {} : { cursor }),
    });
    records.push(...page.records);
    cursor = page.cursor;
  } while (cursor !== null && records.length < options.limit);
  if (ctx.json) {
    ctx.out(
      `${JSON.stringify({ records: records.map((r) => recordJson(r, ctx.nowMs, false)), cursor }, null, 2)}\n`,
    );
    return ExitCode.Ok;
  }
  const { colors, nowMs } = ctx;
  if (records.length === 0) ctx.err('no records\n');
  else {
    const rows = records.map((record) => {
      const state = recordStateAt(record as IdempotencyRecord, nowMs);
      const bytes = bodyBytesOf(record);
      return [
        stateText(state, colors),
        record.scope === '' ? colors.dim(shownValue('')) : shownValue(record.scope),
        shownValue(record.key),
        record.response === null ? colors.dim('-') : String(record.response.status),
        new Date(record.createdAtMs).toISOString(),
        state === 'expired'
          ? colors.dim(`${humanDuration(nowMs - record.expiresAtMs)} ago`)
          : `in ${humanDuration(record.expiresAtMs - nowMs)}`,
        record.response?.bodyOmitted === true
          ? colors.dim('omitted')
          : bytes === null
            ? colors.dim('-')
            : humanBytes(bytes),
      ];
    });
    ctx.out(`${table(['STATE', 'SCOPE', 'KEY', 'STATUS', 'CREATED', 'EXPIRES', 'BODY'], rows, colors)}\n`);
  }
  if (cursor !== null && cursor !== undefined)
    ctx.err(`${ctx.errColors.dim(`more records: add --cursor ${cursor}`)}\n`);
  return ExitCode.Ok;
}

/** `idem stats`: counts by state and the age of the oldest in-flight record. */
export async function stats(ctx: Context, options: { scope?: string }): Promise<ExitCode> {
  const { store } = ctx.opened;
  if (store.stats === undefined)
    throw new CliError('this store cannot count records (it has no stats)', ExitCode.Failed);
  const counted: StoreStats = await store.stats({
    nowMs: ctx.nowMs,
    ...(options.scope === undefined ? {} : { scope: options.scope }),
  });
  const oldest = counted.oldestInFlightCreatedAtMs;
  const ageMs = oldest === null ? null : Math.max(0, ctx.nowMs - oldest);
  if (ctx.json) {
    ctx.out(`${JSON.stringify({ ...counted, oldestInFlightAgeMs: ageMs }, null, 2)}\n`);
    return ExitCode.Ok;
  }
  const { colors } = ctx;
  const lapsed =
    counted.leaseLapsed === 0 ? '' : colors.red(`  ${count(counted.leaseLapsed)} with a lapsed lease`);
  const expiredNote = ctx.opened.kind.startsWith('redis')
    ? ' (Redis deletes them itself)'
    : ' not purged yet';
  ctx.out(
    `${fields(
      [
        ['in flight', `${count(counted.inFlight)}${lapsed}`],
        ['completed', count(counted.completed)],
        ['expired', `${count(counted.expired)}${colors.dim(expiredNote)}`],
        [
          'oldest in flight',
          ageMs === null
            ? colors.dim('none')
            : `${humanDuration(ageMs)} old (created ${new Date(oldest as number).toISOString()})`,
        ],
      ],
      colors,
    )}\n`,
  );
  return ExitCode.Ok;
}

/** `idem purge`: delete expired records in batches, with a progress bar on a terminal. */
export async function purge(ctx: Context, options: { batch: number; graceMs: number }): Promise<ExitCode> {
  const { store, kind } = ctx.opened;
  const beforeMs = ctx.nowMs - options.graceMs;
  const started = performance.now();
  // The expired records now: the bar's end (a purge may find a few more or fewer as it runs).
  const expected = store.stats === undefined ? undefined : (await store.stats({ nowMs: beforeMs })).expired;
  const showBar = !ctx.json && ctx.io.stderr.isTTY === true;
  const bar = showBar
    ? new cliProgress.SingleBar(
        {
          stream: ctx.io.stderr as NodeJS.WritableStream as never,
          format:
            expected === undefined
              ? 'purging {value} records'
              : 'purging [{bar}] {percentage}% | {value}/{total} records | {duration_formatted}',
          // The terminal's modes stay as they are: a Ctrl-C ends the process with no chance to restore a hidden
          // cursor or line wrapping (cli-progress's gracefulExit would swallow the signal instead).
          hideCursor: false,
          linewrap: true,
          clearOnComplete: true,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(Math.max(expected ?? 0, 1), 0);
  let purged = 0;
  let result: { count: number; batches: number };
  try {
    result = await purgeExpiredInBatches(store, {
      beforeMs,
      batchSize: options.batch,
      maxBatches: Number.POSITIVE_INFINITY,
      onBatch: (deleted) => {
        purged += deleted;
        if (bar !== undefined) {
          if (purged > bar.getTotal()) bar.setTotal(purged);
          bar.update(purged);
        }
      },
    });
  } finally {
    bar?.stop();
  }
  const ms = Math.round(performance.now() - started);
  if (ctx.json) {
    ctx.out(`${JSON.stringify({ purged: result.count, batches: result.batches, beforeMs, ms })}\n`);
    return ExitCode.Ok;
  }
  const native = kind.startsWith('redis') ? ctx.colors.dim(' (Redis deletes expired records itself)') : '';
  ctx.out(
    `purged ${count(result.count)} expired record${result.count === 1 ? '' : 's'} in ${count(result.batches)} ` +
      `batch${result.batches === 1 ? '' : 'es'} (${humanDuration(ms)})${native}\n`,
  );
  return ExitCode.Ok;
}

/** `idem migrate`: create or upgrade the SQL schema; `--dry-run` prints it without connecting. */
export async function migrate(ctx: Context): Promise<ExitCode> {
  const { schema, kind } = ctx.opened;
  if (schema === undefined) {
    if (ctx.json) ctx.out(`${JSON.stringify({ migrated: false, reason: 'no schema' })}\n`);
    else
      ctx.out(
        `${kind === 'redis-cluster' ? 'Redis Cluster' : 'Redis'} needs no schema: nothing to migrate\n`,
      );
    return ExitCode.Ok;
  }
  const outcome = await schema.migrate();
  if (ctx.json) ctx.out(`${JSON.stringify({ migrated: true, table: schema.table, ...outcome })}\n`);
  else if (outcome.result === 'created') ctx.out(`created the table ${schema.table} and its expiry index\n`);
  else ctx.out(`the table ${schema.table} is up to date\n`);
  return ExitCode.Ok;
}
