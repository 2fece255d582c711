/**
 * Exponential backoff with full jitter: the wait before retry `retry` (1 for the first retry) is a uniform
 * random time between 0 and `min(maxDelayMs, baseDelayMs × 2^(retry−1))`, in ms. Full jitter spreads the
 * retries of many clients that failed together, so they do not hit a recovering server in lockstep.
 */
export function fullJitterDelayMs(
  retry: number,
  baseDelayMs: number,
  maxDelayMs: number,
  random: () => number,
): number {
  const ceilingMs = Math.min(maxDelayMs, baseDelayMs * 2 ** (retry - 1));
  // A random source that strays outside [0, 1) must not produce a negative wait or one past the ceiling.
  const draw = Math.min(Math.max(random(), 0), 1);
  return Math.floor(draw * ceilingMs);
}
