import { commandTier, isSecretSettingKey, settingTier, systemVerb, VERBS_ELSEWHERE, type SystemTier } from '@fleet/contracts';
import { formatSysLine, type Verb } from '@fleet/device-protocol';
import type { CallFor } from '@fleet/registry-client';
import { ConflictError, ValidationError } from '@fleet/service-kit';
import { isDeviceFileName } from '../domain/device-file-name';
import type { FileUrls } from '../domain/file-urls';
import { settingText } from '../domain/setting-value';
import { findFile, type FileDir } from '../store/files';
import { sealSecret, type SealDeps } from './seal-secret';

export interface LineDeps extends SealDeps {
  urls: FileUrls;
}

export interface DeviceRef {
  deviceId: string;
  product: 'light' | 'meter';
}

/** A command line ready to publish on `sys/exe`, and its verb. */
export interface CommandLine {
  command: string;
  line: string;
  tier: SystemTier;
}

/**
 * The destructive tier needs `confirm` equal to the device id; without it nothing is sent.
 * The gateway checked the tier's permission; the confirm is the owner's check.
 */
export function checkConfirm(tier: SystemTier, device: DeviceRef, confirm: unknown): void {
  if (tier === 'destructive' && confirm !== device.deviceId) {
    throw new ConflictError('This is destructive: send `confirm` equal to the device id. Nothing was sent.', 'confirmation_required');
  }
}

/** `set>key=value`, the value checked against the catalog and sealed (enc1:) when the key is a secret. */
export async function settingLine(deps: SealDeps, call: CallFor, device: DeviceRef, key: string, value: unknown): Promise<CommandLine> {
  const text = settingText(key, value);
  const sent = isSecretSettingKey(key) ? await sealSecret(deps, call, device.deviceId, key, text) : text;
  return { command: 'set', line: formatSysLine('set', [[key, sent]]), tier: settingTier(key) };
}

const stringParam = (params: Record<string, unknown>, name: string): string | undefined => {
  const value = params[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ValidationError(`invalid 'params.${name}': a string`);
  return value;
};

/** A platform file a verb names, with the server's SHA-256 and a download URL for the device. */
async function platformFileArgs(deps: LineDeps, dir: FileDir, name: string | undefined, what: string): Promise<{ sha256: string; url: string }> {
  if (!name) throw new ValidationError(`'params.name' is required: ${what}`);
  if (dir === 'firmware' && !/\.bin$/i.test(name)) throw new ValidationError(`invalid 'params.name': ota_update takes a .bin image in firmware/`);
  const file = await findFile(deps.db, dir, name);
  if (!file) throw new ValidationError(`invalid 'params.name': no platform file '${name}' in ${dir}/ (GET /v1/system/files)`);
  return { sha256: file.sha256, url: await deps.urls.downloadUrl({ dir, name, storageKey: file.storageKey }) };
}

/**
 * The line of a system command request `{command, params?}` for a device, checked against the
 * verb registry: an unknown verb, one the product does not run, an unknown or missing
 * parameter, a file that is not a platform file are 400 with nothing sent.
 */
export async function commandLine(deps: LineDeps, call: CallFor, device: DeviceRef, command: string, params: Record<string, unknown>): Promise<CommandLine> {
  const verb = systemVerb(command);
  if (!verb) {
    const elsewhere = VERBS_ELSEWHERE.find((v) => v.command === command);
    if (elsewhere) throw new ValidationError(`'${command}' is sent with ${elsewhere.route}, which tracks its answer.`);
    throw new ValidationError(`invalid 'command': '${command}' is not a system verb (GET /v1/system/commands lists them)`);
  }
  if (!verb.products.includes(device.product)) throw new ValidationError(`invalid 'command': a ${device.product} does not run '${command}'`);
  const unknown = Object.keys(params).find((name) => !verb.params.some((p) => p.name === name));
  if (unknown !== undefined) throw new ValidationError(`invalid 'params': '${command}' takes no parameter '${unknown}'`);
  const tier = commandTier(command, params) ?? verb.tier;

  switch (verb.command) {
    case 'set': {
      const key = stringParam(params, 'key');
      if (!key) throw new ValidationError(`'params.key' is required`);
      if (!('value' in params)) throw new ValidationError(`'params.value' is required`);
      return settingLine(deps, call, device, key, params.value);
    }
    case 'addfile': {
      const name = stringParam(params, 'name');
      const dest = stringParam(params, 'dest') ?? name;
      if (dest !== undefined && !isDeviceFileName(dest)) throw new ValidationError(`invalid 'params.dest': letters, digits, '.', '_' and '-', at most 64`);
      const { sha256, url } = await platformFileArgs(deps, 'files', name, 'a platform file in files/');
      return { command, tier, line: formatSysLine('addfile', [['name', dest as string], ['sha256', sha256], ['url', url]]) };
    }
    case 'setcert': {
      const name = stringParam(params, 'name');
      if (name !== undefined && !isDeviceFileName(name)) throw new ValidationError(`invalid 'params.name': letters, digits, '.', '_' and '-', at most 64`);
      const { sha256, url } = await platformFileArgs(deps, 'files', name, 'a certificate file in files/');
      return { command, tier, line: formatSysLine('setcert', [['name', name as string], ['sha256', sha256], ['url', url]]) };
    }
    case 'ota_update': {
      const name = stringParam(params, 'name');
      const { sha256, url } = await platformFileArgs(deps, 'firmware', name, 'a .bin image in firmware/');
      return { command, tier, line: formatSysLine('ota_update', [['name', name as string], ['sha256', sha256], ['url', url]]) };
    }
    case 'rmfile': {
      const name = stringParam(params, 'name');
      if (!isDeviceFileName(name)) throw new ValidationError(`'params.name' is required: a file on the device (letters, digits, '.', '_' and '-', at most 64)`);
      return { command, tier, line: formatSysLine('rmfile', [['name', name]]) };
    }
    default:
      return { command, tier, line: formatSysLine(verb.command as Verb) };
  }
}
