// RFC 9110 §10.2.3: Retry-After = HTTP-date / delay-seconds. An HTTP-date is an IMF-fixdate
// (`Sun, 06 Nov 1994 08:49:37 GMT`), or one of the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
// asctime (`Sun Nov  6 08:49:37 1994`) forms, which recipients must still accept.
const DELAY_SECONDS = /^\d+$/;
const IMF_OR_RFC850 = /^[A-Za-z]{3,9}, \d{2}[ -][A-Za-z]{3}[ -]\d{2,4} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * The wait a `Retry-After` value asks for, in ms from `nowMs`: delay-seconds, or the time until an HTTP-date
 * (0 for a date in the past). `undefined` when the header is absent or not one of those forms (`-5`, `1.5`,
 * free text): the caller then backs off on its own.
 *
 * @example parseRetryAfterMs('2', nowMs) // 2000
 */
export function parseRetryAfterMs(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  // Number() of a very long digit string is Infinity: a wait no budget allows, which is what it means.
  if (DELAY_SECONDS.test(text)) return Number(text) * 1000;
  let dateMs = Number.NaN;
  if (IMF_OR_RFC850.test(text)) dateMs = Date.parse(text);
  // asctime carries no zone; it is GMT, which Date.parse must be told.
  else if (ASCTIME.test(text)) dateMs = Date.parse(`${text} GMT`);
  if (Number.isNaN(dateMs)) return undefined;
  return Math.max(0, dateMs - nowMs);
}
