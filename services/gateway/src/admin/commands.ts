import type { Channel, Permission } from '@fleet/contracts';
import { CHANNELS } from '@fleet/contracts';
import { generateApiKey } from '../domain/api-key';
import { DEFAULT_DEVICE_COMMANDS_PER_MIN, DEFAULT_REQUESTS_PER_MIN, NOT_IN_ALL, parseChannels, parsePermissions } from '../domain/partner-settings';
import { createPartner, disablePartner, revokeKey, storeKey, updatePartner, findPartner, type PartnerInput } from '../store/partners';
import type { GatewayDb } from '../store/prisma';

/** A staff command failed in a way worth telling the operator (exit non-zero, message on stderr). */
export class AdminError extends Error {}

/** What `partner help` answers: the commands and the rules of their options. */
export const USAGE: readonly string[] = [
  'partner create --name <name> [--permissions <p1,p2,...|all>] [--grant <org_id>]... [--access-all-devices] [--channels <c1,c2,...>] [--requests-per-min N] [--device-commands-per-min N]',
  'partner update --id <id> [same options as create; given options replace]',
  'partner disable --id <id>',
  'key issue --partner <id>',
  'key revoke --key-prefix <prefix_handle>',
  `--permissions all: every permission except ${NOT_IN_ALL.join(', ')}; name those to grant them (e.g. all,raw_mqtt_devices)`,
  'scope: --grant <org_id> (organization subtrees) or --access-all-devices (every device), never both (exit 2)',
];

export interface ParsedArgs {
  values: Map<string, string[]>;
  flags: Set<string>;
}

const VALUE_FLAGS = ['id', 'name', 'permissions', 'grant', 'channels', 'requests-per-min', 'device-commands-per-min', 'partner', 'key-prefix'];
const BOOLEAN_FLAGS = ['access-all-devices'];

export function parseArgs(argv: string[]): ParsedArgs {
  const values = new Map<string, string[]>();
  const flags = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new AdminError(`unexpected argument '${arg}'`);
    const [rawName, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (BOOLEAN_FLAGS.includes(rawName)) {
      flags.add(rawName);
      continue;
    }
    if (!VALUE_FLAGS.includes(rawName)) throw new AdminError(`unknown option '--${rawName}'`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new AdminError(`option '--${rawName}' needs a value`);
    values.set(rawName, [...(values.get(rawName) ?? []), value]);
  }
  return { values, flags };
}

const one = (args: ParsedArgs, name: string): string | undefined => {
  const list = args.values.get(name);
  if (list && list.length > 1) throw new AdminError(`option '--${name}' given more than once`);
  return list?.[0];
};

const required = (args: ParsedArgs, name: string): string => {
  const value = one(args, name);
  if (value === undefined || value === '') throw new AdminError(`missing required option '--${name}'`);
  return value;
};

function positiveInt(value: string, name: string): number {
  if (!/^[1-9][0-9]{0,8}$/.test(value)) throw new AdminError(`'--${name}' must be a positive whole number`);
  return Number(value);
}

function wrap<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new AdminError((err as Error).message);
  }
}

/** The partner fields a create or update sets from its flags (only the flags given). */
function partnerFields(args: ParsedArgs): Partial<PartnerInput> {
  const fields: Partial<PartnerInput> = {};
  const name = one(args, 'name');
  if (name !== undefined) {
    if (!name.trim()) throw new AdminError("'--name' must not be empty");
    fields.name = name.trim();
  }
  const permissionsArg = one(args, 'permissions');
  let permissions: Permission[] | undefined = permissionsArg !== undefined ? wrap(() => parsePermissions(permissionsArg)) : undefined;
  if (args.flags.has('access-all-devices')) {
    permissions = [...new Set<Permission>([...(permissions ?? []), 'access_all_devices'])];
  }
  if (permissions) fields.permissions = permissions;
  const grants = args.values.get('grant');
  if (grants) fields.orgGrants = [...new Set(grants.map((g) => positiveInt(g, 'grant')))];
  const channels = one(args, 'channels');
  if (channels !== undefined) fields.allowedChannels = wrap(() => parseChannels(channels));
  const rpm = one(args, 'requests-per-min');
  if (rpm !== undefined) fields.requestsPerMin = positiveInt(rpm, 'requests-per-min');
  const dcpm = one(args, 'device-commands-per-min');
  if (dcpm !== undefined) fields.deviceCommandsPerMin = positiveInt(dcpm, 'device-commands-per-min');
  return fields;
}

/**
 * A partner's scope is organization subtrees it was granted or every device, never both: grants
 * beside access_all_devices would be dead weight that hides what the partner really sees.
 */
function refuseMixedScope(permissions: readonly string[], orgGrants: readonly number[]): void {
  if (permissions.includes('access_all_devices') && orgGrants.length > 0) {
    throw new AdminError("'--grant' and access_all_devices ('--access-all-devices') exclude each other: a partner sees granted organizations or every device, not both");
  }
}

/** Runs one `partner ...` or `key ...` command; returns the JSON object to print. */
export async function runAdminCommand(db: GatewayDb, argv: string[]): Promise<Record<string, unknown>> {
  const [entity, verb, ...rest] = argv;
  const args = parseArgs(rest);
  const command = `${entity ?? ''} ${verb ?? ''}`.trim();
  switch (command) {
    case 'partner help':
    case 'key help':
      return { usage: USAGE };
    case 'partner create': {
      required(args, 'name');
      const fields = partnerFields(args);
      refuseMixedScope(fields.permissions ?? [], fields.orgGrants ?? []);
      const input: PartnerInput = {
        name: fields.name as string,
        permissions: fields.permissions ?? [],
        orgGrants: fields.orgGrants ?? [],
        allowedChannels: fields.allowedChannels ?? ([...CHANNELS] as Channel[]),
        requestsPerMin: fields.requestsPerMin ?? DEFAULT_REQUESTS_PER_MIN,
        deviceCommandsPerMin: fields.deviceCommandsPerMin ?? DEFAULT_DEVICE_COMMANDS_PER_MIN,
      };
      const partner = await createPartner(db, input);
      return { id: partner.id, name: partner.name };
    }
    case 'partner update': {
      const id = partnerId(required(args, 'id'));
      const fields = partnerFields(args);
      if (Object.keys(fields).length === 0) throw new AdminError('nothing to update: give at least one option');
      const current = await findPartner(db, id);
      if (!current) throw new AdminError(`no partner with id '${id}'`);
      refuseMixedScope(fields.permissions ?? current.permissions, fields.orgGrants ?? current.orgGrants);
      const partner = await updatePartner(db, id, fields);
      if (!partner) throw new AdminError(`no partner with id '${id}'`);
      return describePartner(partner);
    }
    case 'partner disable': {
      const id = partnerId(required(args, 'id'));
      const partner = await disablePartner(db, id);
      if (!partner) throw new AdminError(`no partner with id '${id}'`);
      return { id: partner.id, name: partner.name, disabled_at: partner.disabledAt?.toISOString() ?? null };
    }
    case 'key issue': {
      const id = partnerId(required(args, 'partner'));
      const partner = await findPartner(db, id);
      if (!partner) throw new AdminError(`no partner with id '${id}'`);
      const issued = generateApiKey();
      await storeKey(db, partner.id, issued.keyPrefix, issued.secretHash);
      return { key: issued.key, key_prefix: issued.keyPrefix };
    }
    case 'key revoke': {
      const keyPrefix = required(args, 'key-prefix');
      if (!(await revokeKey(db, keyPrefix))) throw new AdminError(`no key with prefix '${keyPrefix}'`);
      return { key_prefix: keyPrefix, revoked: true };
    }
    default:
      throw new AdminError(`unknown command '${command}' (see 'partner help')`);
  }
}

function partnerId(value: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) throw new AdminError(`no partner with id '${value}'`);
  return value.toLowerCase();
}

function describePartner(p: { id: string; name: string; permissions: string[]; orgGrants: number[]; allowedChannels: string[]; requestsPerMin: number; deviceCommandsPerMin: number; disabledAt: Date | null }) {
  return {
    id: p.id,
    name: p.name,
    permissions: p.permissions,
    org_grants: p.orgGrants,
    allowed_channels: p.allowedChannels,
    requests_per_min: p.requestsPerMin,
    device_commands_per_min: p.deviceCommandsPerMin,
    disabled: p.disabledAt !== null,
  };
}
