import type { KeywordDefinition } from 'ajv';
import { INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN } from '../catalog/limits.js';

/**
 * `numeric: {...}`: what the spec's `type: integer` and `type: number` become in a JSON body's schema (see
 * json-schema.ts). ajv's `type` knows no bigint, and a body holds every integer past 2^53 as one (see
 * catalog/lossless-json.ts): this keyword takes the place of `type` for numbers and checks the exact value.
 */
export interface NumericSchema {
  /** The integer's width: `int64` where the spec says `format: int64`, else `int32`. Absent: any number. */
  readonly integer?: 'int32' | 'int64';
  /** `null` is allowed too (the spec's `nullable`). */
  readonly nullable?: boolean;
}

const RANGES = {
  int32: [BigInt(INT32_MIN), BigInt(INT32_MAX)],
  int64: [INT64_MIN, INT64_MAX],
} as const;

function problemOf(schema: NumericSchema, data: unknown): string | undefined {
  if (data === null && schema.nullable === true) return undefined;
  const expected = `must be ${schema.integer === undefined ? 'number' : 'integer'}${schema.nullable ? ' or null' : ''}`;
  if (typeof data === 'number') {
    if (!Number.isFinite(data)) return expected;
    if (schema.integer === undefined) return undefined;
    // An integer past 2^53 is a bigint: a double there came from a fraction (5938174936372637279.5) and rounded.
    if (!Number.isSafeInteger(data)) return expected;
  } else if (typeof data === 'bigint') {
    if (schema.integer === undefined) return undefined;
  } else {
    return expected;
  }
  const [min, max] = RANGES[schema.integer];
  const value = BigInt(data);
  return value < min || value > max ? `must be an ${schema.integer} (from ${min} to ${max})` : undefined;
}

function validate(schema: NumericSchema, data: unknown): boolean {
  const problem = problemOf(schema, data);
  if (problem === undefined) return true;
  validate.errors = [{ keyword: 'numeric', message: problem, params: { ...schema } }];
  return false;
}
validate.errors = [] as { keyword: string; message: string; params: object }[];

/** The `numeric` keyword, for both validators (json-schema.ts puts it in the shared component document). */
export const numericKeyword: KeywordDefinition = {
  keyword: 'numeric',
  schemaType: 'object',
  errors: true,
  validate,
};
