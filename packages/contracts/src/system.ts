/**
 * The system interface's verb registry and settings catalog (proto-schemas/system/registry.json):
 * one source for the gateway (which permission a request needs, whether it spends from the
 * destructive ceiling) and for system-files (what it accepts and lists).
 */
import { systemRegistry } from './generated/system-registry';
import type { Permission } from './generated/types';

export type SystemTier = 'control' | 'destructive';
export type SystemProduct = 'light' | 'meter';

export interface VerbParam {
  readonly name: string;
  readonly type: string;
  readonly required: boolean;
  readonly description: string;
}

export interface SystemVerb {
  readonly command: string;
  readonly tier: SystemTier;
  readonly products: readonly SystemProduct[];
  readonly params: readonly VerbParam[];
  readonly description: string;
}

export interface SettingDef {
  readonly key: string;
  readonly type: 'string' | 'integer';
  readonly tier: SystemTier;
  readonly description: string;
  readonly min?: number;
  readonly max?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  /** What minLength and maxLength count: characters (code points, when absent) or the value's UTF-8 bytes. */
  readonly lengthUnit?: 'bytes';
  readonly pattern?: string;
  readonly enum?: readonly string[];
}

export interface VerbElsewhere {
  readonly command: string;
  readonly products: readonly SystemProduct[];
  readonly route: string;
  readonly description: string;
}

export const SYSTEM_VERBS: readonly SystemVerb[] = systemRegistry.verbs as readonly SystemVerb[];
export const VERBS_ELSEWHERE: readonly VerbElsewhere[] = systemRegistry.elsewhere as readonly VerbElsewhere[];
export const SETTINGS_CATALOG: readonly SettingDef[] = systemRegistry.settings as readonly SettingDef[];
/** A key containing one of these (any case) is a secret. */
export const SECRET_KEY_PARTS: readonly string[] = systemRegistry.secret_key_parts;

/** The permission a tier needs. */
export const tierPermission = (tier: SystemTier): Permission => (tier === 'destructive' ? 'system_destructive' : 'system_control');

export const systemVerb = (command: string): SystemVerb | undefined => SYSTEM_VERBS.find((v) => v.command === command);
export const settingDef = (key: string): SettingDef | undefined => SETTINGS_CATALOG.find((s) => s.key === key);

/** The keys whose writes are destructive (connection and identity). */
export const DESTRUCTIVE_SETTING_KEYS: readonly string[] = SETTINGS_CATALOG.filter((s) => s.tier === 'destructive').map((s) => s.key);

/** A key whose value is a secret (contains pass, pwd, key, token, secret or psk in any case): sent only sealed (enc1:). */
export function isSecretSettingKey(key: string): boolean {
  const lower = key.toLowerCase();
  return SECRET_KEY_PARTS.some((part) => lower.includes(part));
}

/** The tier of a settings write: destructive for connection and identity keys, else control (unknown keys are refused later). */
export const settingTier = (key: string): SystemTier => (settingDef(key)?.tier === 'destructive' ? 'destructive' : 'control');

/**
 * The tier of a system command request: the verb's, and for `set` the key's. Undefined for a
 * command the registry does not know (refused as 400 by system-files).
 */
export function commandTier(command: unknown, params: unknown): SystemTier | undefined {
  if (typeof command !== 'string') return undefined;
  const verb = systemVerb(command);
  if (!verb) return undefined;
  if (verb.command === 'set' && params && typeof params === 'object' && typeof (params as { key?: unknown }).key === 'string') {
    return settingTier((params as { key: string }).key);
  }
  return verb.tier;
}
