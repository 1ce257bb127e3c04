/** Products and device ids are device protocol v1's. */
export { isDeviceId, isProduct, PRODUCTS, type Product } from '@fleet/device-protocol';

/** Where devices provisioned without an organization wait (created by a migration with this id). */
export const STAGING_NODE_ID = 1;
export const STAGING_NODE_NAME = 'Staging / Inventory';

/** Length of a display name in characters (code points). */
export const nameLength = (name: string): number => [...name].length;
export const NAME_MAX = 120;
