const DURATION =
  /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;

const SECOND_MS = 1000;
const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/**
 * Parse an ISO-8601 duration (`PT30M`, `PT24H`, `P1D`, `PT1H30M`, `PT0.5S`) into ms; `undefined` when the
 * text is not one. A month counts as 28 days and a year as 365: a key lifetime read too short only makes
 * the client stop retrying earlier, one read too long could reuse a key the server has forgotten.
 *
 * @example parseIsoDurationMs('PT30M') // 1_800_000
 */
export function parseIsoDurationMs(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (match === null || text === 'P' || text.endsWith('T')) return undefined;
  const [, years, months, weeks, days, hours, minutes, seconds] = match;
  const n = (part: string | undefined) => Number((part ?? '0').replace(',', '.'));
  return (
    n(years) * 365 * DAY_MS +
    n(months) * 28 * DAY_MS +
    n(weeks) * 7 * DAY_MS +
    n(days) * DAY_MS +
    n(hours) * HOUR_MS +
    n(minutes) * MINUTE_MS +
    Math.floor(n(seconds) * SECOND_MS)
  );
}
