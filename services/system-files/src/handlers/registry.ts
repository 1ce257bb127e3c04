import { DESTRUCTIVE_SETTING_KEYS, isSecretSettingKey, SECRET_KEY_PARTS, SETTINGS_CATALOG, SYSTEM_VERBS, tierPermission, VERBS_ELSEWHERE } from '@fleet/contracts';
import type { HandlerResult, RequestOf } from '@fleet/service-kit';

/** GET /v1/system/commands: the verb registry and the settings catalog, with what the account may do. */
export async function commandRegistry(req: RequestOf<'system.command.registry'>): Promise<HandlerResult> {
  const held = new Set(req.principal?.permissions ?? []);
  return {
    status: 200,
    body: {
      commands: SYSTEM_VERBS.map((v) => ({
        command: v.command,
        tier: v.tier,
        required_permission: tierPermission(v.tier),
        confirm_required: v.tier === 'destructive',
        allowed: held.has(tierPermission(v.tier)),
        products: [...v.products],
        params: v.params.map((p) => ({ ...p })),
        description: v.description,
      })),
      elsewhere: VERBS_ELSEWHERE.map((v) => ({ command: v.command, route: v.route, products: [...v.products], description: v.description })),
      settings: SETTINGS_CATALOG.map((s) => ({
        key: s.key,
        type: s.type,
        tier: s.tier,
        secret: isSecretSettingKey(s.key),
        allowed: held.has(tierPermission(s.tier)),
        ...(s.min !== undefined ? { min: s.min } : {}),
        ...(s.max !== undefined ? { max: s.max } : {}),
        ...(s.minLength !== undefined ? { min_length: s.minLength } : {}),
        ...(s.maxLength !== undefined ? { max_length: s.maxLength } : {}),
        ...(s.minLength !== undefined || s.maxLength !== undefined ? { length_unit: s.lengthUnit ?? 'characters' } : {}),
        ...(s.pattern !== undefined ? { pattern: s.pattern } : {}),
        ...(s.enum !== undefined ? { enum: [...s.enum] } : {}),
        description: s.description,
      })),
      destructive_settings_keys: [...DESTRUCTIVE_SETTING_KEYS],
      secret_key_parts: [...SECRET_KEY_PARTS],
    },
  };
}
