import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { ApiError, NotFoundError, ValidationError } from '@fleet/service-kit';
import { CONTROL_FREE_PATTERN } from '../routes/schemas';
import type { JsonSchema, RouteDef } from '../routes/types';
import { NOT_FOUND_WHEN_INVALID, routeId } from '../routes/types';

interface RouteValidators {
  params?: ValidateFunction;
  query?: ValidateFunction;
  body?: ValidateFunction;
  /** Declared query parameters, for the strict reading of numbers and booleans. */
  queryProperties: Record<string, JsonSchema>;
}

// verbose: an error carries its schema, so a pattern error can name what was expected (x-expected).
const ajv = new Ajv2020({ allErrors: false, strict: false, verbose: true });
addFormats(ajv);
/** Path parameters are text; this one reads `{profile_id}` as the integer its schema (and the OpenAPI document) says. */
const pathAjv = new Ajv2020({ allErrors: false, strict: false, coerceTypes: true });
addFormats(pathAjv);

/** Deepest nesting of objects and arrays a JSON body may have. */
export const MAX_BODY_DEPTH = 32;

/**
 * Compiles every route's params, query and body schemas once, at start-up, and checks
 * requests against them. Rules that hold on every route, whatever its schemas:
 * - no text anywhere (path, query, body values and field names) contains U+0000 or is
 *   not well-formed Unicode (a lone surrogate);
 * - query numbers are plain decimal (`16`, `-3`, `2.5`; never `0x10`, `1e1` for an integer, ` 16`),
 *   booleans are `true` or `false`, and a parameter is given at most once;
 * - fields declared with the control-free pattern refuse U+0001–U+001F and U+007F too;
 * - a field whose `pattern` is no help to a reader (a long alternation) says in `x-expected`
 *   what it takes, and its 400 says that instead of the pattern.
 */
export class RequestValidator {
  private readonly byRoute = new Map<string, RouteValidators>();

  constructor(routes: readonly RouteDef[]) {
    for (const route of routes) {
      const queryProperties = route.query?.properties ?? {};
      const validators: RouteValidators = { queryProperties };
      if (route.params) {
        validators.params = pathAjv.compile({ type: 'object', properties: route.params, required: Object.keys(route.params) });
      }
      validators.query = ajv.compile({
        type: 'object',
        properties: queryProperties,
        required: route.query?.required ?? [],
        additionalProperties: false,
      });
      if (route.body) validators.body = ajv.compile(route.body);
      this.byRoute.set(routeId(route), validators);
    }
  }

  /** Validates in place (query values are read into their declared types); throws a 400 naming the first bad field. */
  check(route: RouteDef, parts: { params: Record<string, string>; query: Record<string, unknown>; body: unknown }): void {
    refuseUnsafeText(parts.params, 'path');
    refuseUnsafeText(parts.query, 'query');
    if (parts.body !== undefined) refuseUnsafeText(parts.body, 'body');
    const v = this.byRoute.get(routeId(route));
    if (!v) return;
    // A copy: the service receives the path text as sent.
    if (v.params && !v.params({ ...parts.params })) {
      // An id that names no row whatever its form (a profile id `abc`) is not found, as any other id of no row is.
      const name = v.params.errors?.[0]?.instancePath.slice(1);
      if (name !== undefined && route.params?.[name]?.[NOT_FOUND_WHEN_INVALID] === true) throw new NotFoundError('Not found.');
      throw new ValidationError(describe(v.params.errors, 'path'));
    }
    readQueryTypes(parts.query, v.queryProperties);
    if (v.query && !v.query(parts.query)) throw new ValidationError(describe(v.query.errors, 'query'));
    if (v.body && parts.body !== undefined && !v.body(parts.body)) throw new ValidationError(describe(v.body.errors, 'body'));
  }
}

// ---------------------------------------------------------------------------------------
// Bodies

const unsupportedMediaType = (): ApiError =>
  new ApiError(415, 'unsupported_media_type', 'Send the body as Content-Type: application/json (charset utf-8, or none).');

/**
 * True for `application/json` with no charset or charset utf-8 (any letter case, quoted or not);
 * other parameters are ignored. Anything else, including a header that does not parse, is false.
 */
export function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const [type, ...params] = contentType.split(';');
  if ((type ?? '').trim().toLowerCase() !== 'application/json') return false;
  for (const param of params) {
    if (param.trim() === '') continue;
    const match = /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*$/.exec(param);
    if (!match) return false;
    const name = (match[1] as string).toLowerCase();
    const value = (match[2] as string).replace(/^"(.*)"$/s, '$1').toLowerCase();
    if (name === 'charset' && value !== 'utf-8') return false;
  }
  return true;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The body of a request as the route takes it. Every route follows the same rules:
 * an empty body is no body (400 where the route requires one); any other body must be sent as
 * `application/json` in utf-8 (else 415) and be valid UTF-8 holding one JSON object nested at
 * most MAX_BODY_DEPTH deep (else 400). A route that takes no body accepts only `{}`, which is
 * the same as no body; any field in it is 400.
 */
export function readJsonBody(route: RouteDef, contentType: string | undefined, rawBody: Buffer): Record<string, unknown> | undefined {
  if (rawBody.length === 0) {
    if (!route.body || route.bodyOptional) return undefined;
    throw new ValidationError('A JSON object body is required.');
  }
  if (!isJsonMediaType(contentType)) throw unsupportedMediaType();
  let text: string;
  try {
    text = utf8.decode(rawBody);
  } catch {
    throw new ValidationError('The body is not valid UTF-8.');
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ValidationError('The body is not valid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ValidationError('The body must be a JSON object.');
  }
  if (!withinDepth(parsed, MAX_BODY_DEPTH)) throw new ValidationError(`The body is nested more than ${MAX_BODY_DEPTH} levels deep.`);
  if (!route.body) {
    const extra = Object.keys(parsed)[0];
    if (extra !== undefined) throw new ValidationError(`This route takes no body (send none, or {}): unknown field '${extra}'.`);
    return undefined;
  }
  return parsed as Record<string, unknown>;
}

/** True when no object or array in `value` sits deeper than `max` levels (checked without recursion). */
export function withinDepth(value: unknown, max: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length) {
    const item = stack.pop() as { value: unknown; depth: number };
    if (item.value === null || typeof item.value !== 'object') continue;
    const depth = item.depth + 1;
    if (depth > max) return false;
    for (const child of Object.values(item.value as object)) stack.push({ value: child, depth });
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Text

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain U+0000';
  if (LONE_SURROGATE.test(text)) return 'must be well-formed Unicode text (a lone surrogate was sent)';
  return undefined;
}

/** Throws a 400 naming the first value or field name that holds U+0000 or is not well-formed Unicode. */
function refuseUnsafeText(value: unknown, where: 'path' | 'query' | 'body'): void {
  const stack: Array<{ value: unknown; path: string[] }> = [{ value, path: [] }];
  while (stack.length) {
    const item = stack.pop() as { value: unknown; path: string[] };
    if (typeof item.value === 'string') {
      const problem = textProblem(item.value);
      if (problem) throw new ValidationError(`invalid ${item.path.length ? `'${item.path.join('.')}'` : where}: ${problem}`);
      continue;
    }
    if (item.value === null || typeof item.value !== 'object') continue;
    for (const [key, child] of Object.entries(item.value as object)) {
      const problem = Array.isArray(item.value) ? undefined : textProblem(key);
      if (problem) {
        const what = where === 'query' ? 'query parameter name' : where === 'path' ? 'path parameter name' : 'field name';
        const at = item.path.length ? ` in '${item.path.join('.')}'` : '';
        throw new ValidationError(`invalid ${what}${at}: ${problem}`);
      }
      stack.push({ value: child, path: [...item.path, key] });
    }
  }
}

// ---------------------------------------------------------------------------------------
// Query values: strings on the wire, read strictly into the declared type

const DECIMAL_INTEGER = /^-?[0-9]+$/;
const DECIMAL_NUMBER = /^-?[0-9]+(\.[0-9]+)?$/;

function declaredTypes(schema: JsonSchema | undefined): string[] {
  const type = schema?.type;
  return Array.isArray(type) ? (type as string[]) : typeof type === 'string' ? [type] : [];
}

/**
 * Replaces each declared integer, number or boolean parameter given once as text by its value
 * when the text is its plain form; anything else is left as text for the schema to refuse.
 */
function readQueryTypes(query: Record<string, unknown>, properties: Record<string, JsonSchema>): void {
  for (const [name, raw] of Object.entries(query)) {
    if (typeof raw !== 'string' || !Object.hasOwn(properties, name)) continue;
    const types = declaredTypes(properties[name]);
    if (types.includes('string')) continue;
    if (types.includes('integer') && DECIMAL_INTEGER.test(raw)) {
      const n = Number(raw);
      if (Number.isSafeInteger(n)) query[name] = n;
    } else if (types.includes('number') && DECIMAL_NUMBER.test(raw)) {
      const n = Number(raw);
      if (Number.isFinite(n)) query[name] = n;
    } else if (types.includes('boolean') && (raw === 'true' || raw === 'false')) {
      query[name] = raw === 'true';
    }
  }
}

// ---------------------------------------------------------------------------------------

function describe(errors: ErrorObject[] | null | undefined, where: 'path' | 'query' | 'body'): string {
  const e = errors?.[0];
  if (!e) return `invalid ${where}`;
  if (e.keyword === 'additionalProperties') {
    const extra = (e.params as { additionalProperty: string }).additionalProperty;
    return where === 'query' ? `unknown query parameter '${extra}'` : `unknown field '${fieldPath(e.instancePath, extra)}'`;
  }
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    return `missing required ${where === 'query' ? 'query parameter' : 'field'} '${fieldPath(e.instancePath, missing)}'`;
  }
  let message = e.message ?? 'is invalid';
  const expected = (e.parentSchema as Record<string, unknown> | undefined)?.['x-expected'];
  if (e.keyword === 'pattern' && (e.params as { pattern?: string }).pattern === CONTROL_FREE_PATTERN) {
    message = 'must not contain control characters (U+0000 to U+001F, U+007F)';
  } else if (e.keyword === 'pattern' && typeof expected === 'string') {
    message = `expected ${expected}`;
  } else if (where === 'query' && e.keyword === 'type' && e.instancePath.split('/').length === 2) {
    message = `${message}, given once in plain form (decimal digits for a number, true or false)`;
  }
  const field = fieldPath(e.instancePath);
  if (!field) return `invalid ${where}: ${message}`;
  return `invalid '${field}': ${message}`;
}

function fieldPath(instancePath: string, child?: string): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (child) parts.push(child);
  return parts.join('.');
}
