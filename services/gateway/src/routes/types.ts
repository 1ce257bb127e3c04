import type { Permission, RequestSubject } from '@fleet/contracts';
import type { LimitClass } from '../limits/classes';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A JSON Schema (draft 2020-12, as used by OpenAPI 3.1). */
export type JsonSchema = Record<string, unknown>;

/** Handlers the gateway answers itself (it owns partners); everything else goes over the bus. */
export type LocalHandlerName = 'account';

/**
 * A subject from proto-schemas/subjects.json: a misspelt one, or one no service owns, fails the
 * type check. `upload`: a multipart body streamed, never buffered, to the URL the subject answers
 * (`{url, max_bytes}`), whose answer is relayed. `stream`: a long-lived `text/event-stream`
 * answer read from the URL the subject answers (`{url}`) and relayed as it arrives.
 */
export type RouteTarget = { local: LocalHandlerName } | { subject: RequestSubject } | { upload: UploadSubject } | { stream: StreamSubject };

/** Subjects that answer where an upload's body goes (`{url, max_bytes}`). */
export type UploadSubject = Extract<RequestSubject, 'system.upload.open'>;

/** Subjects that answer where a live event stream is read (`{url}`). */
export type StreamSubject = Extract<RequestSubject, 'events.stream.open'>;

/**
 * The permission a request needs when it depends on what is asked (a system verb, a settings
 * key), and whether it spends from the destructive ceiling; undefined leaves the decision to the
 * owning service (an unknown verb is its 400). Checked after validation.
 */
export type TierOf = (request: { params: Record<string, string>; body: unknown }) => { permission: Permission; destructive: boolean } | undefined;

export interface ResponseSpec {
  description: string;
  schema?: JsonSchema;
  /** The media type of the body; default `application/json`. */
  contentType?: string;
  /** An example body (for a media type other than JSON, its text). */
  example?: unknown;
  /** Response headers beyond the common ones, e.g. Location. */
  headers?: string[];
}

/** A path parameter schema flag: a value its schema refuses is 404 `not_found` rather than 400 (an id of no row, whatever its form). */
export const NOT_FOUND_WHEN_INVALID = 'x-not-found-when-invalid';

/** An error a route may answer, beyond the ones every authenticated route shares. */
export interface ErrorSpec {
  status: number;
  code: string;
  when: string;
  /**
   * For a 403 `forbidden`: the permission that would lift it, named in the answer's
   * `required_permission`; absent for a refusal no permission lifts (a channel not allowed).
   */
  liftedBy?: string;
}

/**
 * One row of the route table. The table drives matching (404/405), the permission check,
 * request validation, scope resolution, limits, idempotency, dispatch and the OpenAPI document.
 */
export interface RouteDef {
  method: HttpMethod;
  /** OpenAPI-style path, e.g. '/v1/devices/{device_id}'. */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  /**
   * The permission checked before anything else; null when any authenticated partner may call
   * it; a list when any one of them admits the request (the 403 names the first), with `tierOf`
   * deciding which one this request needs.
   */
  permission: Permission | readonly Permission[] | null;
  tierOf?: TierOf;
  /**
   * Where the light channel the request commands is named: a path parameter or a field of the
   * JSON body. A channel the key may not command is 403 `forbidden` with its permission, before
   * the rest of the request; anything that is not a channel is left to validation.
   */
  channelIn?: { param: string } | { field: string };
  target: RouteTarget;
  /**
   * The route names a device in `{device_id}`: the registry resolves it within the partner's
   * scope before the request goes on (404 otherwise), and the owner receives it in the envelope.
   * `ownerResolves`: the owner is the registry itself, which answers from the same scoped lookup,
   * so the gateway does not ask it first (one bus hop and one query fewer). Only for routes
   * without a product or limit classes, which would need the device before the owner is asked.
   */
  device?: { product?: 'light' | 'meter'; ownerResolves?: boolean };
  /** Path parameter schemas by name (every `{name}` in the path must be here). */
  params?: Record<string, JsonSchema>;
  /** Query parameters: properties and which are required. Unknown parameters are refused. */
  query?: { properties: Record<string, JsonSchema>; required?: string[] };
  /** JSON body schema (an object schema); absent when the route takes no body. */
  body?: JsonSchema;
  /** The body may be omitted entirely (all its fields optional). */
  bodyOptional?: boolean;
  /** Accepts the Idempotency-Key header. */
  idempotent?: boolean;
  /** Limit classes the request spends from besides the per-partner request window. */
  limits?: LimitClass[];
  responses: Record<number, ResponseSpec>;
  errors?: ErrorSpec[];
  deprecated?: { sunset: string; link: string };
}

export const routeId = (route: Pick<RouteDef, 'method' | 'path'>): string => `${route.method} ${route.path}`;

/** The names of a route path's parameters, in order: `/v1/devices/{device_id}/files/{transfer_id}` → device_id, transfer_id. */
export const pathParamNames = (path: string): string[] => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');
