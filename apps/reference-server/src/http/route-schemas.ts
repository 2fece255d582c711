import { openApiDocument } from '../openapi.js';
import { componentRef, createTranslator, type Translator } from './json-schema.js';
import { PARAMETER_LIMITS, PROPERTY_LIMITS } from './limit-keyword.js';

type Node = Record<string, unknown>;

interface Parameter {
  readonly name: string;
  readonly in: string;
  readonly required?: boolean;
  readonly schema?: unknown;
}

/** The validation schemas of one route, as Fastify takes them. */
export interface RouteSchema {
  params?: Node;
  querystring?: Node;
  body?: Node;
}

let translator: Translator | undefined;

/** The spec's components as one JSON Schema document (see json-schema.ts), built once. */
export function specTranslator(): Translator {
  translator ??= createTranslator(openApiDocument().components.schemas, (component, property) => {
    const kind = PROPERTY_LIMITS[component]?.[property];
    return kind === undefined ? undefined : { catalogLimit: kind };
  });
  return translator;
}

const PARAMETER = '#/components/parameters/';

function parameterOf(entry: unknown): Parameter {
  const ref = (entry as { $ref?: string }).$ref;
  return (
    ref?.startsWith(PARAMETER) ? openApiDocument().components.parameters[ref.slice(PARAMETER.length)] : entry
  ) as Parameter;
}

function objectOf(parameters: Parameter[], translate: Translator['translate']): Node | undefined {
  if (parameters.length === 0) return undefined;
  const properties = Object.fromEntries(
    parameters.map((p) => {
      const limit = PARAMETER_LIMITS[p.name];
      const schema = translate(p.schema ?? {}, 'text') as Node;
      return [p.name, { ...schema, ...(limit ? { catalogLimit: limit } : {}) }];
    }),
  );
  const required = parameters.filter((p) => p.required === true).map((p) => p.name);
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

/**
 * The schemas of a route from the operation the spec declares for it: path parameters, query parameters
 * (unknown ones allowed) and the JSON body. A route without a catalog prefix (`/v1/namespaces`) is the spec's
 * `/v1/{prefix}/namespaces` without the prefix. Undefined for a route the spec does not describe.
 */
export function routeSchema(method: string, url: string): RouteSchema | undefined {
  const { paths } = openApiDocument();
  const path = url.replace(/:([^/]+)/g, '{$1}');
  const unprefixed = paths[path] === undefined && path.startsWith('/v1/');
  const item = paths[unprefixed ? `/v1/{prefix}${path.slice(3)}` : path] as Node | undefined;
  const operation = item?.[method.toLowerCase()] as Node | undefined;
  if (item === undefined || operation === undefined) return undefined;
  const { translate } = specTranslator();
  const parameters = [
    ...((item.parameters as unknown[] | undefined) ?? []),
    ...((operation.parameters as unknown[] | undefined) ?? []),
  ].map(parameterOf);
  const params = objectOf(
    parameters.filter((p) => p.in === 'path' && !(unprefixed && p.name === 'prefix')),
    translate,
  );
  const querystring = objectOf(
    parameters.filter((p) => p.in === 'query'),
    translate,
  );
  const content = (operation.requestBody as { content?: Record<string, { schema?: Node }> } | undefined)
    ?.content?.['application/json']?.schema;
  const ref = typeof content?.$ref === 'string' ? content.$ref.split('/').pop() : undefined;
  const body =
    ref === undefined
      ? content === undefined
        ? undefined
        : (translate(content) as Node)
      : { $ref: componentRef(ref) };
  return {
    ...(params === undefined ? {} : { params }),
    ...(querystring === undefined ? {} : { querystring }),
    ...(body === undefined ? {} : { body }),
  };
}
