import type { EventPayloads, EventSubject, ReplyBodies, ReplyFailure, RequestBodies, RequestEnvelope, RequestSubject } from '@fleet/contracts';
import type { Logger } from './logger';
import type { HandlerContext } from './handler-context';
import type { JsonBody } from './json-body';

/** Any JSON object: the body of a subject whose schema proto-schemas does not spell out. */
export type JsonObject = Record<string, unknown>;

/** The body a subject's requests carry: the type of its `body` schema, or any JSON object. */
export type BodyOf<S extends RequestSubject> = [S] extends [keyof RequestBodies] ? RequestBodies[S] : JsonObject;

/** The body a subject's successful replies carry: the type of its `reply` schema, or any JSON object. */
export type ReplyBodyOf<S extends RequestSubject> = [S] extends [keyof ReplyBodies] ? ReplyBodies[S] : JsonObject;

/** An event subject's payload: the type of its schema. */
export type EventOf<S extends EventSubject> = EventPayloads[S];

/** A request envelope of one subject: a subject with a body schema always carries that body. */
export type RequestOf<S extends RequestSubject> = Omit<RequestEnvelope, 'body'> &
  ([S] extends [keyof RequestBodies] ? { body: RequestBodies[S] } : { body?: JsonObject });

/** The reply envelope of one subject, its body typed by the subject's reply schema. */
export type ReplyOf<S extends RequestSubject> =
  | { ok: true; status: number; headers?: Record<string, string>; body?: ReplyBodyOf<S> }
  | ReplyFailure;

/** A reply as Bus.relay returns it: a body its replier wrote as JSON text stays a JsonBody. */
export type RelayedReplyOf<S extends RequestSubject> =
  | { ok: true; status: number; headers?: Record<string, string>; body?: ReplyBodyOf<S> | JsonBody; unspent?: true }
  | ReplyFailure;

/**
 * What a handler answers on success, `Body` being its subject's reply body (ReplyBodyOf), or
 * that body already written as JSON text (JsonBody.of); thrown ApiErrors become error replies.
 */
export interface HandlerResult<Body = JsonObject> {
  status?: number;
  body?: Body | JsonBody;
  headers?: Record<string, string>;
  /**
   * Nothing was done that the route's limits count: a request recognised as one already made,
   * answered with what that one did. The gateway gives back what the request spent from them.
   */
  unspent?: true;
}

export type RequestHandler<S extends RequestSubject = RequestSubject> = (request: RequestOf<S>, ctx: HandlerContext) => Promise<HandlerResult<ReplyBodyOf<S>>>;

/**
 * The one map of what a service serves: a handler for every subject of `S`, typically
 * `SubjectsOf<'<service>'>` (the subjects proto-schemas/subjects.json gives the service), so a
 * subject without a handler, a handler for a subject the service does not own, or a body of the
 * wrong shape fails the type check.
 */
export type ServiceHandlers<S extends RequestSubject> = { [K in S]: RequestHandler<K> };

/** The request a call to another service is made for: its id (for the logs) and its deadline (epoch ms), if any. */
export interface CallFor {
  requestId: string;
  deadline?: number;
}

/** What a client of another service's subjects (packages/<service>-client) is made with. */
export interface ServiceClientOptions {
  /** Longest a call may take when its request has more time left. */
  timeoutMs: number;
  logger: Logger;
}
