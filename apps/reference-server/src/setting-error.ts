/**
 * A setting the server cannot start with: the message names the setting and what it accepts, on one line.
 * `main` prints it alone (no stack) and exits with {@link CONFIGURATION_EXIT_CODE}.
 */
export class SettingError extends Error {
  override readonly name = 'SettingError';
}

/** The exit code of a server stopped by a setting it cannot use (as sysexits' EX_USAGE is 64: a usage error). */
export const CONFIGURATION_EXIT_CODE = 2;

/** A value as a setting's message quotes it: on one line, control characters escaped, at most 80 characters. */
export function quoted(value: string): string {
  const text = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  // JSON.stringify leaves U+2028/U+2029 and C1 controls as they are; a terminal may act on them.
  return text.replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * A database URL fit to print: its password replaced by `***` (also in a URL that does not parse, and in a
 * `?password=` parameter), so no log line or message ever carries it.
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    for (const name of [...parsed.searchParams.keys()])
      if (/pass|secret|token|key/i.test(name)) parsed.searchParams.set(name, '***');
    // `sqlite:` URLs are opaque (no host): printed as given.
    return parsed.host === '' && !/^[a-z]+:\/\//i.test(url) ? url : parsed.href;
  } catch {
    return url.replace(/(\/\/[^/:@]*:)[^@/]*@/, '$1***@');
  }
}

/** Free text (a driver's message) with the password of any `scheme://user:password@` in it replaced by `***`. */
export const redactedText = (text: string): string =>
  text.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:)[^\s@/]*@/gi, '$1***@');
