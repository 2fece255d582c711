import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import { parse } from 'yaml';

// The Iceberg REST OpenAPI spec the server validates requests with (openapi/): tests never read ../shared.
const spec = parse(
  readFileSync(new URL('../../openapi/rest-catalog-open-api.yaml', import.meta.url), 'utf8'),
) as {
  paths: Record<
    string,
    Record<
      string,
      { responses: Record<string, { $ref?: string; content?: Record<string, { schema: unknown }> }> }
    >
  >;
  components: { responses: Record<string, { content?: Record<string, { schema: unknown }> }> };
};

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
// ajv-formats is CommonJS: its plugin is the module itself.
(formats as unknown as (instance: Ajv) => void)(ajv);
ajv.addSchema(spec as object, 'spec');

const templates = Object.keys(spec.paths).map((template) => ({
  template,
  pattern: new RegExp(`^${template.replace('/v1/{prefix}', '/v1').replace(/\{[^}]+\}/g, '[^/]+')}$`),
}));

/** The spec's path template for a request path without a catalog prefix. */
export function templateOf(path: string): string | undefined {
  return templates.find(({ pattern }) => pattern.test(path))?.template;
}

const compiled = new Map<string, ValidateFunction>();

/**
 * Validate a response against the spec: the status must be one the operation declares, and a JSON body must
 * match the declared schema. Returns the problems found (none means valid).
 */
export function checkResponse(method: string, path: string, status: number, body: string): string[] {
  const template = templateOf(path.split('?')[0] as string);
  if (template === undefined) return [`no operation in the spec for ${method} ${path}`];
  const operation = spec.paths[template]?.[method.toLowerCase()];
  if (operation === undefined) return [`the spec has no ${method} ${template}`];
  const declared = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`];
  if (declared === undefined) return [`${method} ${template} does not declare status ${status}`];
  const response =
    declared.$ref === undefined
      ? declared
      : spec.components.responses[declared.$ref.split('/').pop() as string];
  const schemaRef = response?.content?.['application/json'] as { schema?: { $ref?: string } } | undefined;
  if (schemaRef === undefined || body === '') return [];
  // The view operations declare their errors as a bare ErrorModel, while their own examples (and every other
  // operation) wrap it in IcebergErrorResponse; the catalog answers every error wrapped, as the examples do.
  const bareErrorModel = status >= 400 && schemaRef.schema?.$ref === '#/components/schemas/ErrorModel';
  const pointer = bareErrorModel
    ? 'spec#/components/schemas/IcebergErrorResponse'
    : declared.$ref === undefined
      ? `spec#/paths/${template.replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`
      : `spec#/components/responses/${declared.$ref.split('/').pop()}/content/application~1json/schema`;
  let validate = compiled.get(pointer);
  if (validate === undefined) {
    validate = ajv.getSchema(pointer) as ValidateFunction;
    compiled.set(pointer, validate);
  }
  if (validate(JSON.parse(body))) return [];
  return (validate.errors ?? []).map(
    (e) => `${method} ${template} ${status}: ${e.instancePath} ${e.message}`,
  );
}
