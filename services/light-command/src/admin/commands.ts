import { availableCommands, checkNarrowing, CATALOG, COMMAND_NAMES, describeCommand, findCommand, type Bounds, type NarrowedBound } from '../domain/catalog';
import { narrowCommand, overridesOf, resetCommands, withdrawCommands } from '../store/overrides';
import type { LightDb } from '../store/prisma';

/** A staff command failed in a way worth telling the operator (exit non-zero, message on stderr). */
export class AdminError extends Error {}

const USAGE =
  'use: command grant --partner <id> (--command <name> [--bound <param>=<min>:<max>[:<default>]]... | --all), ' +
  'command revoke --partner <id> (--command <name> | --all), command reset --partner <id> [--command <name>], ' +
  'command list --partner <id>, command catalog';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

interface Options {
  single: Map<string, string>;
  bounds: string[];
  all: boolean;
}

function parseOptions(argv: string[], allowed: string[]): Options {
  const out: Options = { single: new Map(), bounds: [], all: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new AdminError(`unexpected argument '${arg}'`);
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (!allowed.includes(name)) throw new AdminError(`unknown option '--${name}'`);
    if (name === 'all') {
      if (inline !== undefined) throw new AdminError("'--all' takes no value");
      out.all = true;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new AdminError(`option '--${name}' needs a value`);
    if (name === 'bound') {
      out.bounds.push(value);
      continue;
    }
    if (out.single.has(name)) throw new AdminError(`option '--${name}' given more than once`);
    out.single.set(name, value);
  }
  return out;
}

function partnerOf(opts: Options): string {
  const partner = opts.single.get('partner');
  if (partner === undefined) throw new AdminError("missing required option '--partner'");
  if (!UUID.test(partner)) throw new AdminError("'--partner' must be a partner id (as `partner create` printed it)");
  return partner.toLowerCase();
}

function commandsOf(opts: Options): string[] {
  const command = opts.single.get('command');
  if (opts.all && command !== undefined) throw new AdminError("give either '--command' or '--all', not both");
  if (opts.all) return [...COMMAND_NAMES];
  if (command === undefined) throw new AdminError("missing '--command <name>' (or '--all')");
  if (!findCommand(command)) throw new AdminError(`unknown command '${command}'; the catalog has ${COMMAND_NAMES.join(', ')}`);
  return [command];
}

/** `<param>=<min>:<max>[:<default>]`, checked against the catalog. */
export function parseBound(command: string, text: string): [string, NarrowedBound] {
  const m = /^([a-z0-9_]+)=([^:]+):([^:]+)(?::([^:]+))?$/.exec(text);
  if (!m) throw new AdminError(`'--bound ${text}' must read <param>=<min>:<max>[:<default>]`);
  const [, param, ...numbers] = m as unknown as [string, string, string, string, string | undefined];
  for (const n of numbers) if (n !== undefined && !NUMBER.test(n)) throw new AdminError(`'--bound ${text}': '${n}' is not a number`);
  const bound: NarrowedBound = { min: Number(numbers[0]), max: Number(numbers[1]), ...(numbers[2] !== undefined ? { default: Number(numbers[2]) } : {}) };
  const def = findCommand(command);
  const problem = def ? checkNarrowing(def, param, bound) : `unknown command '${command}'`;
  if (problem) throw new AdminError(`'--bound ${text}': ${problem}`);
  return [param, bound];
}

/**
 * `command grant`, `command revoke`, `command reset`, `command list`, `command catalog`: staff's
 * per-partner overrides of the predefined catalog, which a partner holding predefined_commands
 * otherwise has whole with the catalog's bounds. Answers one JSON object.
 */
export async function runAdminCommand(db: LightDb, argv: string[]): Promise<Record<string, unknown>> {
  const [entity, verb, ...rest] = argv;
  if (entity !== 'command') throw new AdminError(`unknown command '${entity ?? ''}'; ${USAGE}`);
  switch (verb) {
    case 'grant': {
      const opts = parseOptions(rest, ['partner', 'command', 'bound', 'all']);
      const partner = partnerOf(opts);
      const commands = commandsOf(opts);
      if (opts.all && opts.bounds.length > 0) throw new AdminError("'--bound' narrows one command: use it with '--command'");
      const bounds: Bounds = {};
      for (const text of opts.bounds) {
        const [param, bound] = parseBound(commands[0] as string, text);
        if (bounds[param]) throw new AdminError(`'--bound ${param}=...' given more than once`);
        bounds[param] = bound;
      }
      // Granting without bounds gives the command back with the catalog's bounds, as a partner
      // without overrides has it; so `--all` restores every default.
      if (Object.keys(bounds).length === 0) await resetCommands(db, partner, opts.all ? 'all' : commands);
      else await narrowCommand(db, partner, commands[0] as string, bounds);
      return { partner_id: partner, granted: commands, ...(opts.all ? {} : { bounds }) };
    }
    case 'revoke': {
      const opts = parseOptions(rest, ['partner', 'command', 'all']);
      const partner = partnerOf(opts);
      const commands = commandsOf(opts);
      await withdrawCommands(db, partner, commands);
      return { partner_id: partner, withdrawn: commands };
    }
    case 'reset': {
      const opts = parseOptions(rest, ['partner', 'command']);
      const partner = partnerOf(opts);
      const restored = await resetCommands(db, partner, opts.single.has('command') ? commandsOf(opts) : 'all');
      return { partner_id: partner, restored };
    }
    case 'list': {
      const opts = parseOptions(rest, ['partner']);
      const partner = partnerOf(opts);
      const overrides = await overridesOf(db, partner);
      // The gateway holds the partner's permissions and channels: this shows every channel.
      const everyChannel = ['light1', 'light2', 'light3', 'sound', 'contact'];
      return {
        partner_id: partner,
        commands: availableCommands(overrides).map(({ def, bounds }) => {
          const override = overrides.get(def.name);
          return { ...describeCommand(def, everyChannel, bounds), narrowed: bounds, ...(override ? { narrowed_at: override.setAt.toISOString() } : {}) };
        }),
        withdrawn: CATALOG.filter((c) => overrides.get(c.name)?.withdrawn).map((c) => c.name),
      };
    }
    case 'catalog': {
      parseOptions(rest, []);
      return { commands: CATALOG.map((c) => describeCommand(c, c.channels, {})) };
    }
    default:
      throw new AdminError(`unknown command 'command ${verb ?? ''}'; ${USAGE}`);
  }
}
