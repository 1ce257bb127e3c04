/**
 * Alert profiles and alert signals (spec, Configuration rules 4–6): listings of global plus
 * own rows, edits and deletes of own rows only (others are 404), a version bump on every
 * update (profiles keep each version as a revision), unique names, 50 own rows of each kind.
 */
import type { RequestEnvelope } from '@fleet/contracts';
import { transactionBy } from '@fleet/db';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError, type HandlerContext, type HandlerResult } from '@fleet/service-kit';
import { checkDescription, checkEntries, checkLevel, checkName, checkRules } from '../domain/documents';
import type { Rule } from '../domain/metrics';
import * as store from '../store/documents';
import { markForWrite } from '../store/devices';
import type { ConfigDb, ConfigTx } from '../store/prisma';
import { bodyOf, checked, idParam, onlyFields, principalOf } from './envelope';

/** Own rows of each kind a partner may hold. */
export const OWN_ROWS_MAX = 50;

const scopeOf = (ownerId: string | null): 'global' | 'partner' => (ownerId === null ? 'global' : 'partner');

/** Every condition reads back as `{metric, op, value}`: with is_null and not_null, whose value is not kept, `value` is null. */
const rulesView = (rules: readonly Rule[]) => rules.map((rule) => ({ ...rule, all: rule.all.map((c) => ({ metric: c.metric, op: c.op, value: c.value ?? null })) }));

export const profileView = (p: store.ProfileRow) => ({
  id: p.id,
  name: p.name,
  scope: scopeOf(p.ownerId),
  is_default: p.isDefault,
  version: p.version,
  description: p.description,
  rules: rulesView(p.rules),
  default: p.defaultLevel,
});

export const signalView = (s: store.SignalRow) => ({
  id: s.id,
  name: s.name,
  scope: scopeOf(s.ownerId),
  is_default: s.isDefault,
  version: s.version,
  description: s.description,
  entries: s.entries,
});

/** The cap and the name, checked under the owner's lock. */
async function admit(tx: ConfigTx, kind: store.DocumentKind, ownerId: string, name: string, existing?: number): Promise<void> {
  await store.lockOwner(tx, kind, ownerId);
  if (existing === undefined && (await store.countOwn(tx, kind, ownerId)) >= OWN_ROWS_MAX) {
    throw new ForbiddenError(`Your account already holds ${OWN_ROWS_MAX} ${kind}s, the most it may hold; delete one first.`, 'limit_reached');
  }
  if (await store.nameTaken(tx, kind, ownerId, name, existing)) throw new ConflictError(`A ${kind} named '${name}' already exists.`, 'name_taken');
}

function someField(body: Record<string, unknown>, fields: readonly string[]): void {
  if (!fields.some((f) => f in body)) throw new ValidationError(`Send at least one of ${fields.join(', ')}.`);
}

export async function listProfiles(db: ConfigDb, req: RequestEnvelope): Promise<HandlerResult> {
  return { body: { profiles: (await store.visibleProfiles(db, principalOf(req).partner_id)).map(profileView) } };
}

const PROFILE_FIELDS = ['name', 'description', 'rules', 'default'] as const;

export async function createProfile(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const body = bodyOf(req);
  onlyFields(body, PROFILE_FIELDS);
  if (!('name' in body)) throw new ValidationError("missing required field 'name'");
  if (!('rules' in body)) throw new ValidationError("missing required field 'rules'");
  const fields = checked(() => ({
    name: checkName(body.name),
    description: 'description' in body ? checkDescription(body.description) : null,
    rules: checkRules(body.rules),
    defaultLevel: 'default' in body ? checkLevel(body.default, 'default') : ('CLEAR' as const),
  }));
  const id = await transactionBy(db, ctx, async (tx) => {
    await admit(tx, 'profile', ownerId, fields.name);
    return store.insertProfile(tx, ownerId, fields);
  });
  return { status: 201, headers: { Location: `/v1/profiles/${id}` }, body: { id } };
}

export async function updateProfile(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const id = idParam(req, 'profile_id');
  const body = bodyOf(req);
  onlyFields(body, PROFILE_FIELDS);
  someField(body, PROFILE_FIELDS);
  const change = checked(() => ({
    name: 'name' in body ? checkName(body.name) : undefined,
    description: 'description' in body ? checkDescription(body.description) : undefined,
    rules: 'rules' in body ? checkRules(body.rules) : undefined,
    defaultLevel: 'default' in body ? checkLevel(body.default, 'default') : undefined,
  }));
  const version = await transactionBy(db, ctx, async (tx) => {
    const current = await store.ownProfile(tx, ownerId, id);
    if (!current) throw new NotFoundError('Profile not found.');
    const name = change.name ?? current.name;
    await admit(tx, 'profile', ownerId, name, id);
    return store.updateProfile(tx, current, {
      name,
      description: change.description !== undefined ? change.description : current.description,
      rules: change.rules ?? current.rules,
      defaultLevel: change.defaultLevel ?? current.defaultLevel,
    });
  });
  return { body: { id, version } };
}

export async function deleteProfile(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const id = idParam(req, 'profile_id');
  await transactionBy(db, ctx, async (tx) => {
    if (!(await store.ownProfile(tx, ownerId, id))) throw new NotFoundError('Profile not found.');
    const count = await store.sensorsUsingProfile(tx, id);
    if (count > 0) throw new ConflictError(`The profile is used by ${count} sensor${count === 1 ? '' : 's'}; give them another profile first.`, 'in_use', { count });
    await store.deleteProfile(tx, id);
  });
  return { status: 204 };
}

export async function listSignals(db: ConfigDb, req: RequestEnvelope): Promise<HandlerResult> {
  return { body: { alert_signals: (await store.visibleSignals(db, principalOf(req).partner_id)).map(signalView) } };
}

const SIGNAL_FIELDS = ['name', 'description', 'entries'] as const;

export async function createSignal(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const body = bodyOf(req);
  onlyFields(body, SIGNAL_FIELDS);
  if (!('name' in body)) throw new ValidationError("missing required field 'name'");
  if (!('entries' in body)) throw new ValidationError("missing required field 'entries'");
  const fields = checked(() => ({
    name: checkName(body.name),
    description: 'description' in body ? checkDescription(body.description) : null,
    entries: checkEntries(body.entries).entries,
  }));
  const id = await transactionBy(db, ctx, async (tx) => {
    await admit(tx, 'signal', ownerId, fields.name);
    return store.insertSignal(tx, ownerId, fields);
  });
  return { status: 201, headers: { Location: `/v1/alert-signals/${id}` }, body: { id } };
}

export async function updateSignal(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const id = idParam(req, 'signal_id');
  const body = bodyOf(req);
  onlyFields(body, SIGNAL_FIELDS);
  someField(body, SIGNAL_FIELDS);
  const change = checked(() => ({
    name: 'name' in body ? checkName(body.name) : undefined,
    description: 'description' in body ? checkDescription(body.description) : undefined,
    entries: 'entries' in body ? checkEntries(body.entries).entries : undefined,
  }));
  const version = await transactionBy(db, ctx, async (tx) => {
    const current = await store.ownSignal(tx, ownerId, id);
    if (!current) throw new NotFoundError('Alert signal not found.');
    const name = change.name ?? current.name;
    await admit(tx, 'signal', ownerId, name, id);
    const v = await store.updateSignal(tx, current, {
      name,
      description: change.description !== undefined ? change.description : current.description,
      entries: change.entries ?? current.entries,
    });
    // New entries reach the lights showing the signal at the next cycle (the spec allows up to the hour).
    if (change.entries) await markForWrite(tx, await store.lightsShowing(tx, id));
    return v;
  });
  return { body: { id, version } };
}

export async function deleteSignal(db: ConfigDb, req: RequestEnvelope, ctx: HandlerContext): Promise<HandlerResult> {
  const ownerId = principalOf(req).partner_id;
  const id = idParam(req, 'signal_id');
  await transactionBy(db, ctx, async (tx) => {
    if (!(await store.ownSignal(tx, ownerId, id))) throw new NotFoundError('Alert signal not found.');
    // Allowed while in use: those lights go back to the default signal, written at the next cycle.
    await markForWrite(tx, await store.deleteSignal(tx, id));
  });
  return { status: 204 };
}
