// OpenAPI schema objects → JSON Schema (2020-12) that ajv compiles. The Iceberg spec says OpenAPI 3.1 but still
// writes some 3.0 idioms, and uses discriminators ajv cannot take as written:
//
// - `$ref: '#/components/schemas/X'` → `<SPEC_ID>#/$defs/X`: all components live in one schema document.
// - `nullable: true` (3.0) → `null` added to the type (or to the enum, or as an alternative).
// - `discriminator` with a `mapping` on a base that its subtypes `allOf` (TableRequirement): the base is kept
//   twice, `X.base` (what the subtypes extend) and `X` (one of the subtypes, picked by the tag).
// - `oneOf` / `anyOf` whose branches each fix the same property to distinct strings (TableUpdate's `action`)
//   → ajv's `discriminator` + `oneOf`: the tag picks the branch, and an error names that branch's problem.
// - any other `oneOf` → `anyOf`: the spec's unions overlap (`Type` lists `variant` and any primitive string),
//   and code generators read them as "the first that fits"; a strict oneOf would reject what the spec allows.
// - `type: integer` and `type: number` in a JSON body → the `numeric` keyword (numeric-keyword.ts), since a body
//   holds integers past 2^53 as bigints, which ajv's `type` refuses: `format: int64` is an int64
//   (−2^63 … 2^63 − 1, Iceberg's long), any other integer an int32 (all of them are Java ints in Iceberg).
//   Path and query parameters are text, coerced by ajv's own `type`: theirs keep `type: integer` with those
//   bounds (an int64 one within ±(2^53 − 1), the most a coerced double holds exactly; the spec has none).
// - `example` and 3.0-only keywords are dropped; `additionalProperties` is kept as written (absent = allowed).

import { INT32_MAX, INT32_MIN } from '../catalog/limits.js';
import type { NumericSchema } from './numeric-keyword.js';

type Node = Record<string, unknown>;

/** The `$id` of the document holding every translated component. */
export const SPEC_ID = 'iceberg-rest';
const COMPONENT = '#/components/schemas/';

/** A JSON Schema reference to a translated component. */
export const componentRef = (name: string): string => `${SPEC_ID}#/$defs/${encodeURIComponent(name)}`;

/** Extra keywords for a property of a component (the catalog's own limits on names and locations). */
export type Overlay = (component: string, property: string) => Node | undefined;

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);
const SCHEMA_LISTS = new Set(['allOf', 'prefixItems']);
const SCHEMA_VALUES = new Set([
  'items',
  'additionalProperties',
  'not',
  'contains',
  'propertyNames',
  'if',
  'then',
  'else',
  'unevaluatedProperties',
  'unevaluatedItems',
]);
const DROPPED = new Set(['nullable', 'discriminator', 'example', 'xml', 'externalDocs']);

/** What a schema validates: a JSON body as parsed, or text (path and query parameters) that ajv coerces. */
export type Validated = 'json' | 'text';

export interface Translator {
  /** The schema document of every component, with `$id` {@link SPEC_ID}. */
  readonly document: Node;
  /** Translate a schema found elsewhere in the spec (a parameter's), whose refs point at the document. */
  translate(schema: unknown, validated?: Validated): unknown;
}

export function createTranslator(components: Record<string, unknown>, overlay: Overlay): Translator {
  const nameOf = (ref: unknown) =>
    typeof ref === 'string' && ref.startsWith(COMPONENT) ? ref.slice(COMPONENT.length) : undefined;
  const resolve = (node: unknown): Node | undefined => {
    const name = isNode(node) ? nameOf(node.$ref) : undefined;
    return name === undefined ? (isNode(node) ? node : undefined) : (components[name] as Node | undefined);
  };

  // Bases whose discriminator maps the tag to subtypes that extend them (allOf), without a union of their own.
  const bases = new Set(
    Object.entries(components)
      .filter(([, schema]) => {
        const discriminator = isNode(schema) ? schema.discriminator : undefined;
        return (
          isNode(discriminator) &&
          isNode(discriminator.mapping) &&
          !('oneOf' in (schema as Node)) &&
          !('anyOf' in (schema as Node))
        );
      })
      .map(([name]) => name),
  );

  /** The property every branch fixes to its own string(s), if there is one. */
  const tagOf = (branches: unknown[]): string | undefined => {
    const resolved = branches.map(resolve);
    const first = resolved[0];
    if (first === undefined || !isNode(first.properties)) return undefined;
    const values = (branch: Node | undefined, tag: string): unknown[] | undefined => {
      const property = isNode(branch?.properties) ? (branch.properties as Node)[tag] : undefined;
      if (!isNode(property)) return undefined;
      return typeof property.const === 'string' ? [property.const] : (property.enum as unknown[] | undefined);
    };
    return Object.keys(first.properties).find((tag) => {
      const all = resolved.map((branch) => values(branch, tag));
      if (all.some((v) => v === undefined || !v.every((x) => typeof x === 'string'))) return false;
      const flat = all.flat();
      return new Set(flat).size === flat.length;
    });
  };

  const union = (branches: unknown[], node: Node, validated: Validated): Node => {
    const translated = branches.map((branch) => translate(branch, { validated }));
    const tag = tagOf(branches);
    if (tag === undefined) return { anyOf: translated };
    const required = Array.isArray(node.required) ? (node.required as string[]) : [];
    return {
      discriminator: { propertyName: tag },
      oneOf: translated,
      required: required.includes(tag) ? required : [...required, tag],
    };
  };

  function translate(
    node: unknown,
    options: { extends?: boolean; component?: string; validated?: Validated } = {},
  ): unknown {
    const validated = options.validated ?? 'json';
    const inner = (item: unknown, more: { extends?: boolean } = {}) =>
      translate(item, { ...more, validated });
    if (Array.isArray(node)) return node.map((item) => inner(item));
    if (!isNode(node)) return node;
    const out: Node = {};
    for (const [keyword, value] of Object.entries(node)) {
      if (DROPPED.has(keyword)) continue;
      if (keyword === '$ref') {
        const name = nameOf(value);
        // A subtype extending a discriminated base gets the plain base; everyone else gets the union.
        out.$ref =
          name === undefined
            ? value
            : componentRef(options.extends && bases.has(name) ? `${name}.base` : name);
      } else if (keyword === 'oneOf' || keyword === 'anyOf') {
        Object.assign(out, union(value as unknown[], node, validated));
      } else if (keyword === 'allOf') {
        out.allOf = (value as unknown[]).map((item) => inner(item, { extends: true }));
      } else if (SCHEMA_LISTS.has(keyword)) {
        out[keyword] = (value as unknown[]).map((item) => inner(item));
      } else if (SCHEMA_MAPS.has(keyword) && isNode(value)) {
        out[keyword] = Object.fromEntries(
          Object.entries(value).map(([name, schema]) => {
            const extra =
              keyword === 'properties' && options.component ? overlay(options.component, name) : undefined;
            const translated = inner(schema) as Node;
            return [name, extra === undefined ? translated : { ...translated, ...extra }];
          }),
        );
      } else if (SCHEMA_VALUES.has(keyword)) {
        out[keyword] = inner(value);
      } else if (keyword !== 'required' || out.required === undefined) {
        out[keyword] = value;
      }
    }
    return numbers(node.nullable === true ? nullable(out) : out, validated);
  }

  const $defs: Node = {};
  for (const [name, schema] of Object.entries(components)) {
    if (bases.has(name)) {
      const base = schema as Node;
      const targets = [...new Set(Object.values((base.discriminator as Node).mapping as Node))];
      $defs[`${name}.base`] = translate(base, { component: name });
      $defs[name] = {
        allOf: [{ $ref: componentRef(`${name}.base`) }],
        ...union(
          targets.map(($ref) => ({ $ref })),
          base,
          'json',
        ),
      };
    } else {
      $defs[name] = translate(schema, { component: name });
    }
  }
  return {
    document: { $id: SPEC_ID, $defs },
    translate: (schema, validated = 'json') => translate(schema, { validated }),
  };
}

function nullable(schema: Node): Node {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] };
  if (Array.isArray(schema.enum)) return { ...schema, enum: [...schema.enum, null] };
  return { anyOf: [schema, { type: 'null' }] };
}

const NUMERIC_TYPES = new Set(['integer', 'number']);

/** A schema whose `type` admits numbers, as `validated` needs it (see the top of this file). */
function numbers(schema: Node, validated: Validated): Node {
  const types = (Array.isArray(schema.type) ? schema.type : [schema.type]) as unknown[];
  if (!types.some((type) => NUMERIC_TYPES.has(type as string))) return schema;
  const integer = types.includes('number') ? undefined : schema.format === 'int64' ? 'int64' : 'int32';
  if (validated === 'text') {
    if (integer === undefined) return schema;
    const [min, max] =
      integer === 'int64' ? [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] : [INT32_MIN, INT32_MAX];
    return { ...schema, minimum: schema.minimum ?? min, maximum: schema.maximum ?? max };
  }
  const others = types.filter((type) => !NUMERIC_TYPES.has(type as string));
  // The spec has none; a spec that did would need more than `nullable`: fail at startup, not at request time.
  if (others.some((type) => type !== 'null'))
    throw new Error(`cannot translate a type that mixes numbers with others: ${JSON.stringify(schema.type)}`);
  const { type: _type, ...rest } = schema;
  const numeric: NumericSchema = {
    ...(integer === undefined ? {} : { integer }),
    ...(others.includes('null') ? { nullable: true } : {}),
  };
  return { ...rest, numeric };
}
