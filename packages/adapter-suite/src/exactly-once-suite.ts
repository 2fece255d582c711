import assert from 'node:assert/strict';
import { callOutcome, createIdempotentFetch, type FetchFunction } from '@idem/client';
import { v7 } from 'uuid';
import { type Business, createBusiness } from './business.js';
import { faultRates, type LossyProxyStats, startLossyProxy } from './lossy-proxy.js';
import { stores } from './stores.js';
import type { MakeServer, SuiteHarness } from './support.js';

export interface ExactlyOnceOptions {
  /** Logical calls, each one `POST /orders` through `@idem/client`. @default 1000 */
  readonly calls?: number;
  /** Calls in flight at once. @default 32 */
  readonly concurrency?: number;
  /** The share of answers the proxy loses. @default 0.3 */
  readonly lossRate?: number;
  readonly seed?: number;
  /** What `@idem/client` sends each attempt with. @default the global fetch */
  readonly fetch?: FetchFunction;
}

/**
 * The bug the suite exists to catch, as a control: a client that mints a new key for every attempt, so a
 * retry after a lost answer is a new request to the server.
 */
export const freshKeyPerAttempt: FetchFunction = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('idempotency-key', v7());
  return fetch(input, { ...init, headers });
};

/** What one run measured: what the client sent, what the proxy lost, what the server executed. */
export interface ExactlyOnceFigures {
  readonly calls: number;
  readonly attempts: number;
  readonly lost: number;
  readonly executions: number;
  /** Executions past the first of a call. */
  readonly duplicates: number;
  /** Calls that never executed. */
  readonly losses: number;
  /** Calls whose caller did not get its first execution's answer. */
  readonly wrongAnswers: number;
  /** Calls whose final answer was a replay (an earlier attempt had executed). */
  readonly replays: number;
  readonly proxy: Readonly<LossyProxyStats>;
  readonly elapsedMs: number;
}

// A run takes seconds; on 2 busy cores, many more. Never a hang: the client's bounds end every call.
const RUN_TIMEOUT_MS = 120_000;

/** Run `items` through `work`, at most `concurrency` at a time. */
export async function inPool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** The faults of a proxy run, by kind. */
export function describeLosses(stats: Readonly<LossyProxyStats>): string {
  return (
    `${stats.droppedAnswers} dropped after execution, ${stats.resetsAfterForward} reset after forwarding, ` +
    `${stats.resetsBeforeForward} reset before, ${stats.answered503} proxy 503s`
  );
}

/** The suite's figures as one line, as the package READMEs quote them. */
export function describeFigures(name: string, f: ExactlyOnceFigures): string {
  return (
    `${name}: ${f.calls} calls, ${f.attempts} attempts (${(f.attempts / f.calls).toFixed(2)} per call), ` +
    `${f.lost} answers lost (${((100 * f.lost) / f.proxy.requests).toFixed(1)} %: ${describeLosses(f.proxy)}), ` +
    `${f.executions} executions, ` +
    `${f.duplicates} duplicates, ${f.losses} losses, ${f.wrongAnswers} wrong answers, ${f.replays} replays, ` +
    `${f.elapsedMs} ms`
  );
}

/** A body as JSON when it is JSON (the server's answers), else as text (the proxy's own 503). */
export function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Count each call's executions: `POST /orders` with `{ call: n }` records the id it created for call n. */
function countExecutions(business: Business): Map<number, number[]> {
  const executions = new Map<number, number[]>();
  const createOrder = business.createOrder;
  business.createOrder = (body) => {
    const answer = createOrder(body);
    const { id } = JSON.parse(answer.body.toString()) as { id: number };
    const call = (body as { call: number }).call;
    executions.set(call, [...(executions.get(call) ?? []), id]);
    return answer;
  };
  return executions;
}

/**
 * Send `calls` logical `POST /orders` through `@idem/client` and a proxy that loses `lossRate` of the answers
 * (answers dropped after the server executed, connections reset before and after forwarding, 503s), to a
 * server made by `makeServer` over `makeStore`; count what the handler executed for each call and what each
 * caller got.
 */
export async function runExactlyOnce(
  makeServer: MakeServer,
  makeStore: (typeof stores)[string],
  options: ExactlyOnceOptions = {},
): Promise<ExactlyOnceFigures> {
  const calls = options.calls ?? 1000;
  const store = await makeStore();
  const business = createBusiness();
  const executions = countExecutions(business);
  const server = await makeServer({ options: { store, heartbeatIntervalMs: false }, business });
  const proxy = await startLossyProxy(server.url, {
    faults: faultRates(options.lossRate ?? 0.3),
    seed: options.seed ?? 7,
  });
  // Short waits keep the run fast; attempts are many, so that no call runs out of them at 30 % loss.
  const idempotentFetch = createIdempotentFetch({
    maxAttempts: 30,
    baseDelayMs: 2,
    maxDelayMs: 50,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  const answers = new Map<
    number,
    { status: number; id: unknown; call: unknown; attempts: number; replayed: boolean }
  >();
  const started = Date.now();
  try {
    await inPool(
      Array.from({ length: calls }, (_, call) => call),
      options.concurrency ?? 32,
      async (call) => {
        const response = await idempotentFetch(`${proxy.url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ call }),
        });
        const body = jsonOrText(await response.text()) as { id?: unknown; order?: { call?: unknown } } | null;
        const outcome = callOutcome(response);
        answers.set(call, {
          status: response.status,
          id: body?.id,
          call: body?.order?.call,
          attempts: outcome?.attempts ?? 0,
          replayed: outcome?.replayed ?? false,
        });
      },
    );
  } finally {
    await proxy.close();
    await server.close();
    await store.close?.();
  }
  let duplicates = 0;
  let losses = 0;
  let wrongAnswers = 0;
  let attempts = 0;
  let replays = 0;
  for (let call = 0; call < calls; call++) {
    const ids = executions.get(call) ?? [];
    const answer = answers.get(call);
    if (ids.length === 0) losses++;
    duplicates += Math.max(0, ids.length - 1);
    if (answer?.status !== 201 || answer.call !== call || answer.id !== ids[0]) wrongAnswers++;
    attempts += answer?.attempts ?? 0;
    if (answer?.replayed) replays++;
  }
  return {
    calls,
    attempts,
    lost: proxy.lost(),
    executions: business.calls('orders'),
    duplicates,
    losses,
    wrongAnswers,
    replays,
    proxy: { ...proxy.stats },
    elapsedMs: Date.now() - started,
  };
}

/**
 * The client half against an adapter: logical calls through `@idem/client` and a proxy that loses 30 % of
 * the answers (after the server executed, before, and in between) each execute exactly once, and each caller
 * gets the answer of that execution.
 */
export function exactlyOnceSuite(
  harness: SuiteHarness,
  makeServer: MakeServer,
  options: ExactlyOnceOptions = {},
) {
  const calls = options.calls ?? 1000;
  const lossPercent = Math.round((options.lossRate ?? 0.3) * 100);
  harness.describe('@idem/client through a lossy network', () => {
    for (const [name, makeStore] of Object.entries(stores)) {
      harness.test(
        `${calls} calls, ${lossPercent} % of answers lost: each executes exactly once, each caller gets that execution's answer (${name})`,
        async () => {
          const figures = await runExactlyOnce(makeServer, makeStore, options);
          console.info(describeFigures(name, figures));
          assert.equal(figures.losses, 0, 'every call executed');
          assert.equal(figures.duplicates, 0, 'no call executed twice');
          assert.equal(figures.executions, calls, 'the handler ran once per call');
          assert.equal(figures.wrongAnswers, 0, "every caller got its execution's answer");
          // The faults did happen, each kind of them.
          assert.ok(figures.lost > calls * (options.lossRate ?? 0.3) * 0.8, `answers lost: ${figures.lost}`);
          const { droppedAnswers, resetsAfterForward, resetsBeforeForward, answered503 } = figures.proxy;
          for (const count of [droppedAnswers, resetsAfterForward, resetsBeforeForward, answered503])
            assert.ok(count > 0, 'every kind of fault happened');
          assert.ok(figures.replays > 0, 'answers lost after an execution came back as replays');
        },
        RUN_TIMEOUT_MS,
      );
    }
    harness.test(
      'control: a client that changes the key on every attempt executes calls twice, and this suite sees it',
      async () => {
        const figures = await runExactlyOnce(makeServer, stores.memory as (typeof stores)[string], {
          ...options,
          calls: 200,
          fetch: freshKeyPerAttempt,
        });
        assert.ok(figures.duplicates > 0, `duplicates: ${figures.duplicates}`);
        assert.ok(figures.wrongAnswers > 0, `wrong answers: ${figures.wrongAnswers}`);
      },
    );
  });
}
