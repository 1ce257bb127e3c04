import Ajv2020, { type ValidateFunction, type ErrorObject } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { schemaBundle } from './generated/schemas';
import { eventSubjects, requestSubjects, type EventSubject, type RequestSubject, type SubjectsOf } from './generated/subjects';
import type { ReplyEnvelope, RequestEnvelope } from './generated/types';

const SCHEMA_BASE = 'https://schemas.fleet.local/';

/** Thrown when a message does not match its contract; `where` names the schema. */
export class ContractViolation extends Error {
  constructor(
    readonly where: string,
    readonly details: string,
  ) {
    super(`${where} violates its contract: ${details}`);
    this.name = 'ContractViolation';
  }
}

const ajv = new Ajv2020({ allErrors: false, strict: true, allowUnionTypes: true });
addFormats(ajv);
for (const schema of schemaBundle) ajv.addSchema(schema);

const compiled = new Map<string, ValidateFunction>();

/** The validator of a schema by its path under proto-schemas, e.g. 'envelope/request'. */
export function validatorFor(name: string): ValidateFunction {
  let validate = compiled.get(name);
  if (!validate) {
    const found = ajv.getSchema(`${SCHEMA_BASE}${name}.json`);
    if (!found) throw new Error(`no schema named ${name}`);
    validate = found;
    compiled.set(name, validate);
  }
  return validate;
}

/** The validator of a schema kept outside the bundle (a catalog's inline schema), compiled once per key. */
export function validatorOfSchema(key: string, schema: Record<string, unknown>): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  return validate;
}

export function describeErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return 'invalid';
  return errors.map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`).join('; ');
}

function check<T>(name: string, value: unknown): T {
  const validate = validatorFor(name);
  if (!validate(value)) throw new ContractViolation(name, describeErrors(validate.errors));
  return value as T;
}

export const checkRequestEnvelope = (value: unknown): RequestEnvelope => check('envelope/request', value);
export const checkReplyEnvelope = (value: unknown): ReplyEnvelope => check('envelope/reply', value);

/** Checks an event payload against the schema its subject declares in subjects.json. */
export function checkEvent<T>(subject: EventSubject, value: unknown): T {
  const id = eventSubjects[subject].schema;
  return check<T>(id.slice(SCHEMA_BASE.length, -'.json'.length), value);
}

/** The schema name (path under proto-schemas) of a schema id from subjects.json. */
const schemaName = (id: string): string => id.slice(SCHEMA_BASE.length, -'.json'.length);

/**
 * Checks a request body against the `body` schema its subject declares in subjects.json (a
 * subject without one accepts any body). Clients check what they send and test stand-ins what
 * they receive, so a body the owner would refuse fails where it is made.
 */
export function checkRequestBody<T>(subject: RequestSubject, body: unknown): T {
  // A subject outside subjects.json (a test's own) has no schema.
  const id = (requestSubjects as Record<string, { body?: string } | undefined>)[subject]?.body;
  return id ? check<T>(schemaName(id), body) : (body as T);
}

/** Whether replies of a subject have a `reply` schema to be checked against. */
export function hasReplySchema(subject: RequestSubject): boolean {
  return Boolean((requestSubjects as Record<string, { reply?: string } | undefined>)[subject]?.reply);
}

/** Checks a reply body against the `reply` schema its subject declares in subjects.json (if any). */
export function checkReplyBody<T>(subject: RequestSubject, body: unknown): T {
  const id = (requestSubjects as Record<string, { reply?: string } | undefined>)[subject]?.reply;
  return id ? check<T>(schemaName(id), body) : (body as T);
}

/** The request subjects a service serves: those subjects.json gives it as owner. */
export function subjectsOf<Owner extends string>(owner: Owner): SubjectsOf<Owner>[] {
  return (Object.keys(requestSubjects) as RequestSubject[]).filter((s) => requestSubjects[s].owner === owner) as SubjectsOf<Owner>[];
}
