/** The code of an idem coordinator's "another request with this key is still in flight" answer. */
export const IN_PROGRESS_CODE = 'IDEMPOTENCY_IN_PROGRESS';

// Enough for any error body; a larger 409 is not the coordinator's.
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** The `code` of a JSON error body (`{ "error": { "code" } }`, as idem answers, or `{ "code" }`), if any. */
async function errorCodeOf(response: Response): Promise<unknown> {
  const reader = response.clone().body?.getReader();
  if (reader === undefined) return undefined;
  const decoder = new TextDecoder();
  let text = '';
  let length = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      length += value.byteLength;
      if (length > MAX_ERROR_BODY_BYTES) return undefined;
      text += decoder.decode(value, { stream: true });
    }
    text += decoder.decode();
  } catch {
    return undefined;
  } finally {
    reader.cancel().catch(() => {});
  }
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown }; code?: unknown } | null;
    return body?.error?.code ?? body?.code;
  } catch {
    return undefined;
  }
}

/**
 * Whether an answer may succeed if the same request is sent again with the same key: a status in `retryOn`,
 * or a 409 that says the first request is still in progress (a `Retry-After`, or the coordinator's
 * `IDEMPOTENCY_IN_PROGRESS` code). Any other 409 is a real conflict (Iceberg's `CommitFailedException`,
 * `AlreadyExistsException`) and final, like every other 4xx.
 */
export async function isRetryableAnswer(response: Response, retryOn: ReadonlySet<number>): Promise<boolean> {
  if (retryOn.has(response.status)) return true;
  if (response.status !== 409) return false;
  if (response.headers.has('retry-after')) return true;
  return (await errorCodeOf(response)) === IN_PROGRESS_CODE;
}
