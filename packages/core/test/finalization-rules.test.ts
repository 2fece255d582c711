import { defaultFinalizationRule } from '@idem/core';
import { describe, expect, test } from 'vitest';

describe('default finalization rules (design: Finalization rules)', () => {
  test.each([200, 201, 202, 204, 206, 299])('%i (2xx) is finalized and replayed', (status) => {
    expect(defaultFinalizationRule(status)).toBe('finalize');
  });
  test.each([400, 404, 405, 406, 409, 410, 411, 412, 413, 414, 415, 422])(
    '%i (deterministic 4xx) is finalized and replayed',
    (status) => {
      expect(defaultFinalizationRule(status)).toBe('finalize');
    },
  );
  test.each([401, 403, 407, 408, 419, 425, 429])('%i (time or credentials) is released', (status) => {
    expect(defaultFinalizationRule(status)).toBe('release');
  });
  test.each([500, 501, 502, 503, 504, 599])(
    '%i (5xx: commit state unknown) is released, never stored',
    (status) => {
      expect(defaultFinalizationRule(status)).toBe('release');
    },
  );
  test.each([100, 103, 301, 302, 304, 307, 308])('%i (1xx/3xx) is finalized', (status) => {
    expect(defaultFinalizationRule(status)).toBe('finalize');
  });
  test.each([402, 416, 417, 418, 421, 423, 424, 426, 428, 431, 451])(
    '%i (a 4xx the design does not list) is released, the safe side',
    (status) => {
      expect(defaultFinalizationRule(status)).toBe('release');
    },
  );
});
