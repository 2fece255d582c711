import { createHmac, randomBytes } from 'node:crypto';
import { logText } from './log-text.js';

const MAX_REMEMBERED = 1_000;

/**
 * Masks principals for logs (`user-***`): the first characters
 * stay (at most 3, and at most a third of the name, so a short name gives little away), the rest becomes
 * `***`, and a short keyed hash follows so that the lines of one principal can still be told apart from
 * another's. Without a key, a random one per process: hashes then match within a process only, and a list
 * of likely names cannot be hashed to find who is who.
 *
 * @example maskPrincipal('alice') // 'a***#3f1c9a0b'
 */
export function principalMasker(hashKey: string | undefined): (principal: string) => string {
  const key = hashKey ?? randomBytes(32).toString('hex');
  // A server sees few principals and masks one per audit line: each is hashed once (bounded, then cleared).
  const masked = new Map<string, string>();
  return (principal) => {
    let mask = masked.get(principal);
    if (mask === undefined) {
      const visible = Math.min(3, Math.floor(principal.length / 3));
      const hash = createHmac('sha256', key).update(principal).digest('hex').slice(0, 8);
      mask = `${logText(principal.slice(0, visible))}***#${hash}`;
      if (masked.size >= MAX_REMEMBERED) masked.clear();
      masked.set(principal, mask);
    }
    return mask;
  };
}
