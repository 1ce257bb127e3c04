import { createHash } from 'node:crypto';
import { ackLine, arg, type SysCommand } from '@fleet/device-protocol';
import { isSecretSettingKey, openSetting } from './credentials';
import type { DeviceOptions, FileEntry, SettingValue } from './device-types';

/** The system verbs every product runs (device protocol, `sys/exe`). */
export const COMMON_VERBS: ReadonlySet<string> = new Set(['query', 'reboot', 'set', 'addfile', 'setcert', 'rmfile', 'ota_update', 'clearsettings', 'formatfs', 'factory_reset']);

/** What a common verb may read and change of the device, and what it may make it do. */
export interface VerbHost {
  readonly deviceId: string;
  readonly opts: DeviceOptions;
  /** The key that opens `enc1:` setting values (absent without a root secret). */
  readonly settingsKey: Buffer | undefined;
  files: FileEntry[];
  fwVersion: string;
  activeSettings: Record<string, SettingValue>;
  pendingSettings: Record<string, SettingValue>;
  sendAck(line: string): Promise<boolean>;
  sendLog(text: string): Promise<boolean>;
  publishSettings(): Promise<boolean>;
  /** Power-cycles after the acknowledgement is out (reboot, ota_update). */
  reboot(reason: string): void;
  factoryReset(): Promise<void>;
}

/** Runs one common verb and sends its acknowledgement (and what follows it: settings, a reboot). */
export async function runCommonVerb(host: VerbHost, cmd: SysCommand): Promise<unknown> {
  const line = cmd.line;
  switch (cmd.verb) {
    case 'query':
      await host.sendAck(ackLine(line, 'ok'));
      await host.publishSettings();
      return;
    case 'reboot':
      await host.sendAck(ackLine(line, 'ok'));
      await host.sendLog('rebooting');
      host.reboot('reboot');
      return;
    case 'set':
      return host.sendAck(setVerb(host, cmd));
    case 'addfile':
    case 'setcert':
      return host.sendAck(await fileVerb(host, cmd));
    case 'rmfile': {
      const name = arg(cmd, 'name');
      if (!name) return host.sendAck(ackLine(line, 'failed', 'missing name'));
      const index = host.files.findIndex((f) => f.name === name);
      if (index < 0) return host.sendAck(ackLine(line, 'failed', 'no such file'));
      host.files.splice(index, 1);
      return host.sendAck(ackLine(line, 'ok'));
    }
    case 'ota_update': {
      const name = arg(cmd, 'name');
      if (!name || !arg(cmd, 'url') || !/^[0-9a-fA-F]{64}$/.test(arg(cmd, 'sha256') ?? '')) return host.sendAck(ackLine(line, 'failed', 'bad arguments'));
      if (!host.opts.acceptOta) return host.sendAck(ackLine(line, 'failed', 'signature invalid'));
      await host.sendAck(ackLine(line, 'ok'));
      host.fwVersion = name.replace(/\.bin$/i, '');
      host.reboot('ota');
      return;
    }
    case 'clearsettings':
      host.activeSettings = {};
      host.pendingSettings = {};
      return host.sendAck(ackLine(line, 'ok'));
    case 'formatfs':
      host.files = [];
      return host.sendAck(ackLine(line, 'ok'));
    case 'factory_reset':
      await host.sendAck(ackLine(line, 'ok'));
      await host.factoryReset();
      return;
    default:
      return host.sendAck(ackLine(line, 'unknown'));
  }
}

/**
 * `set>key=value`: applied at the next reboot (`ok`), or at once for the device's immediate
 * keys (`applied`). A secret key must come sealed (`enc1:`) unless the firmware reports `enc: false`.
 */
function setVerb(host: VerbHost, cmd: SysCommand): string {
  const pair = cmd.args[0];
  if (cmd.args.length !== 1 || !pair || !pair[0] || pair[1] === undefined) return ackLine(cmd.line, 'failed', 'bad arguments');
  const [key, raw] = pair;
  let value: SettingValue = coerce(raw);
  if (isSecretSettingKey(key) && (host.opts.enc ?? true)) {
    if (!raw.startsWith('enc1:')) return ackLine(cmd.line, 'failed', 'secret not encrypted');
    if (host.settingsKey) {
      try {
        value = openSetting(host.settingsKey, host.deviceId, key, raw);
      } catch {
        return ackLine(cmd.line, 'failed', 'decrypt failed');
      }
    } else value = raw;
  }
  if (host.opts.immediateKeys?.includes(key)) {
    host.activeSettings[key] = value;
    return ackLine(cmd.line, 'applied');
  }
  host.pendingSettings[key] = value;
  return ackLine(cmd.line, 'ok');
}

/** `addfile` / `setcert`: downloaded and checked against its SHA-256 with `fetchFiles`, else taken as is. */
async function fileVerb(host: VerbHost, cmd: SysCommand): Promise<string> {
  const name = arg(cmd, 'name');
  const sha256 = arg(cmd, 'sha256');
  const url = arg(cmd, 'url');
  if (!name || !url || !sha256 || !/^[0-9a-fA-F]{64}$/.test(sha256)) return ackLine(cmd.line, 'failed', 'bad arguments');
  let size = 0;
  if (host.opts.fetchFiles) {
    await host.sendLog(`downloading ${name}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
      if (!res.ok) return ackLine(cmd.line, 'failed', `download http ${res.status}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (createHash('sha256').update(body).digest('hex') !== sha256.toLowerCase()) return ackLine(cmd.line, 'failed', 'sha256 mismatch');
      size = body.length;
    } catch (err) {
      return ackLine(cmd.line, 'failed', `download ${(err as Error).name === 'TimeoutError' ? 'timeout' : 'error'}`);
    }
  } else {
    size = parseInt(sha256.slice(0, 4), 16) + 1024;
  }
  const existing = host.files.find((f) => f.name === name);
  if (existing) existing.size = size;
  else host.files.push({ name, size });
  return ackLine(cmd.line, 'ok');
}

/** A setting value as the firmware stores it: numbers and booleans typed, the rest text. */
function coerce(raw: string): SettingValue {
  if (/^-?(0|[1-9][0-9]{0,14})(\.[0-9]+)?$/.test(raw)) return Number(raw);
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  return raw;
}
