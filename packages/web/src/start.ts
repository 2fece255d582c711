import { type BeginResult, type Execution, errorResponse, type FormatError } from '@idem/core';
import { responseOf } from './answers.js';

/** A `begin` result that runs nothing: a refusal, or a replay. */
export type AnsweredResult<Host> = Extract<BeginResult<Host>, { action: 'reject' | 'replay' }>;

/**
 * The `Response` for a `begin` result that runs nothing: a refusal (its body the host's `formatError`), or a
 * replay.
 *
 * @example
 * if (result.action === 'reject' || result.action === 'replay') return answerWithout(result, request, formatError);
 */
export function answerWithout<Host>(
  result: AnsweredResult<Host>,
  host: Host,
  formatError: FormatError<Host> | undefined,
): Response {
  return result.action === 'reject'
    ? responseOf(errorResponse(result.error, host, formatError))
    : responseOf(result.response);
}

/**
 * The `execute` branch: `true` when the handler should run; when the client left while the key was being
 * reserved (`request.signal` aborted), the execution is aborted (the key released) and this is `false`: run
 * nothing for nobody.
 */
export async function startWebExecution(execution: Execution, request: Request): Promise<boolean> {
  if (!request.signal.aborted) return true;
  await execution.abort();
  return false;
}
