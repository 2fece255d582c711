import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FastifySchemaCompiler } from 'fastify';
import { componentRef } from './json-schema.js';
import { catalogLimitKeyword } from './limit-keyword.js';
import { numericKeyword } from './numeric-keyword.js';
import { specTranslator } from './route-schemas.js';

function newAjv(coerceTypes: boolean) {
  const ajv = new Ajv2020({
    strict: false,
    discriminator: true,
    allErrors: false,
    // The spec's formats (uuid, date …) are descriptive; int64 and integer bounds are the translation's
    // `numeric` keyword, which takes the exact values of a body (bigints past 2^53) as ajv's `type` cannot.
    validateFormats: false,
    // A JSON body is validated as sent: a wrong type is a 400, never quietly converted, and no field is added
    // or removed (the idempotency fingerprint is computed over the body after validation).
    coerceTypes,
    useDefaults: false,
    removeAdditional: false,
  });
  ajv.addKeyword(catalogLimitKeyword);
  ajv.addKeyword(numericKeyword);
  ajv.addSchema(specTranslator().document);
  return ajv;
}

let ajvs: { body: Ajv2020; text: Ajv2020 } | undefined;

/** Two compilers, built once per process: JSON bodies as they are, path and query strings coerced. */
function compilers() {
  ajvs ??= { body: newAjv(false), text: newAjv(true) };
  return ajvs;
}

/** Fastify's validator compiler: path parameters and query strings are text, so they are coerced to the spec's types. */
export const validatorCompiler: FastifySchemaCompiler<Record<string, unknown>> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? compilers().body : compilers().text).compile(schema);

/**
 * Check a document (a metadata file a client registers) against a component of the spec; returns the first
 * problem found, or undefined.
 */
export function documentProblem(component: string, value: unknown): string | undefined {
  const validate = compilers().body.getSchema(componentRef(component));
  if (validate === undefined) throw new Error(`no component ${component} in the spec`);
  if (validate(value)) return undefined;
  const [error] = validate.errors ?? [];
  return error === undefined ? 'invalid' : `${error.instancePath || '/'} ${error.message}`;
}
