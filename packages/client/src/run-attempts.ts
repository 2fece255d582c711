import { abortReason, attemptSignal, raceAbort, sleep } from './abort.js';
import { fullJitterDelayMs } from './backoff.js';
import { type GaveUp, isReplay, recordOutcome } from './call-outcome.js';
import type { ResolvedOptions, RetryReason } from './options.js';
import type { RequestTemplate } from './request-template.js';
import { parseRetryAfterMs } from './retry-after.js';
import { isRetryableAnswer } from './retryable-answer.js';

/** One logical call: what each attempt sends, and until when its key may be sent again. */
export interface CallPlan {
  readonly template: RequestTemplate;
  /** The key every attempt carries (already in the template's headers); `undefined` for a safe method. */
  readonly key: string | undefined;
  /** No retry starts at or after this time (epoch ms): the key's lifetime ends then. */
  readonly keyExpiresAtMs: number;
}

// Duck-typed: a custom fetch may answer with a Response class of its own.
const isResponseLike = (value: unknown): value is Response =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Partial<Response>).headers?.get === 'function';

type Step = { readonly delayMs: number } | { readonly gaveUp: GaveUp };

/**
 * Send a call's attempts until one gets a final answer, the caller aborts, or a bound is reached; return the
 * last answer (a retryable one once retrying stopped) or throw the last network error. Every attempt sends
 * the same template, so the same key and the same body.
 */
export async function runAttempts(options: ResolvedOptions, plan: CallPlan): Promise<Response> {
  const { clock, maxAttempts, maxElapsedMs } = options;
  const { template, key, keyExpiresAtMs } = plan;
  const signal = template.signal;
  const startMs = clock.nowMs();
  const finish = <T>(result: T, attempts: number, gaveUp: GaveUp | undefined): T => {
    recordOutcome(result, {
      key,
      attempts,
      replayed: isResponseLike(result) && isReplay(result),
      elapsedMs: clock.nowMs() - startMs,
      gaveUp,
    });
    return result;
  };
  const nextStep = (attempt: number, retryAfterMs: number | undefined): Step => {
    if (!template.replayable) return { gaveUp: 'one-shot-body' };
    if (attempt >= maxAttempts) return { gaveUp: 'max-attempts' };
    // Retry-After is a floor: the server knows how long it needs, and backoff still spreads the clients.
    const backoffMs = fullJitterDelayMs(attempt, options.baseDelayMs, options.maxDelayMs, options.random);
    const delayMs = Math.max(retryAfterMs ?? 0, backoffMs);
    const nextAtMs = clock.nowMs() + delayMs;
    if (nextAtMs - startMs > maxElapsedMs) return { gaveUp: 'max-elapsed' };
    if (nextAtMs >= keyExpiresAtMs) return { gaveUp: 'key-lifetime' };
    return { delayMs };
  };

  // Timers fire late: the bounds are checked again when the wait ends, before the next attempt goes out.
  const overdue = (): GaveUp | undefined => {
    const nowMs = clock.nowMs();
    if (nowMs - startMs > maxElapsedMs) return 'max-elapsed';
    if (nowMs >= keyExpiresAtMs) return 'key-lifetime';
    return undefined;
  };

  // The retryable answer of the previous attempt: returned as it is if no further attempt is made.
  let previous: Response | undefined;
  for (let attempt = 1; ; attempt++) {
    if (previous !== undefined) {
      discard(previous);
      previous = undefined;
    }
    // A custom fetch may not look at the signal: an aborted call sends nothing more.
    if (signal?.aborted) throw abortReason(signal);
    const guard = attemptSignal(signal, options.attemptTimeoutMs);
    let response: Response;
    try {
      // null, not absent: a caller's `signal: null` must also detach the signal of their Request.
      response = await options.fetch(template.input, { ...template.init, signal: guard.signal ?? null });
    } catch (error) {
      if (signal?.aborted) throw abortReason(signal);
      // fetch rejects with a TypeError on a network error, and only then: the request was checked before.
      if (!(error instanceof TypeError) && !guard.timedOut()) throw finish(error, attempt, undefined);
      const step = nextStep(attempt, undefined);
      if ('gaveUp' in step) throw finish(error, attempt, step.gaveUp);
      await wait(options, plan, attempt, step.delayMs, { kind: 'error', error });
      const late = overdue();
      if (late !== undefined) throw finish(error, attempt, late);
      continue;
    } finally {
      guard.clearTimeout();
    }
    // Telling an "in progress" 409 reads its body, which may be slow: the caller's abort ends that too.
    let retryable: boolean;
    try {
      retryable = await raceAbort(isRetryableAnswer(response, options.retryOn), signal);
    } catch (error) {
      discard(response);
      throw error;
    }
    // The signal may have aborted the body's read itself, which then looked like no code at all.
    if (signal?.aborted) {
      discard(response);
      throw abortReason(signal);
    }
    if (!retryable) return finish(response, attempt, undefined);
    const retryAfterMs = parseRetryAfterMs(response.headers.get('retry-after'), clock.nowMs());
    const step = nextStep(attempt, retryAfterMs);
    if ('gaveUp' in step) return finish(response, attempt, step.gaveUp);
    previous = response;
    try {
      await wait(options, plan, attempt, step.delayMs, { kind: 'status', status: response.status });
    } catch (error) {
      discard(response);
      throw error;
    }
    const late = overdue();
    if (late !== undefined) return finish(response, attempt, late);
  }
}

/**
 * Read no further: the connection goes back to the pool. Not awaited: cancelling one branch of a teed body
 * (a cloned Response) settles only once the other branch is cancelled too.
 */
function discard(response: Response): void {
  response.body?.cancel().catch(() => {});
}

/** Tell `onRetry`, then wait; the caller's abort ends the wait at once. */
function wait(
  options: ResolvedOptions,
  plan: CallPlan,
  attempt: number,
  delayMs: number,
  reason: RetryReason,
): Promise<void> {
  const { template } = plan;
  options.onRetry({ attempt, delayMs, method: template.method, url: template.url, key: plan.key, reason });
  return sleep(delayMs, template.signal);
}
