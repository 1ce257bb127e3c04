import { schemaBundle } from './generated/schemas';
import type { Channel, Permission } from './generated/types';

function enumOf<T extends string>(id: string): readonly T[] {
  const schema = schemaBundle.find((s) => s.$id === id);
  if (!schema || !Array.isArray(schema.enum)) throw new Error(`schema ${id} has no enum`);
  return Object.freeze(schema.enum as T[]);
}

/** Every permission key, in the order the spec lists them. */
export const PERMISSIONS = enumOf<Permission>('https://schemas.fleet.local/common/permission.json');
/** Every light channel, in the order the spec lists them. */
export const CHANNELS = enumOf<Channel>('https://schemas.fleet.local/common/channel.json');
