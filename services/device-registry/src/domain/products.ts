/** The products the registry knows. */
export const PRODUCTS = ['light', 'meter'] as const;
export type Product = (typeof PRODUCTS)[number];

export const isProduct = (value: unknown): value is Product => typeof value === 'string' && (PRODUCTS as readonly string[]).includes(value);

/** Device identifier: 12 uppercase hexadecimal characters, no separators. */
export const DEVICE_ID_PATTERN = /^[0-9A-F]{12}$/;
export const isDeviceId = (value: unknown): value is string => typeof value === 'string' && DEVICE_ID_PATTERN.test(value);

/** Where devices provisioned without an organization wait (created by a migration with this id). */
export const STAGING_NODE_ID = 1;
export const STAGING_NODE_NAME = 'Staging / Inventory';

/** Length of a display name in characters (code points). */
export const nameLength = (name: string): number => [...name].length;
export const NAME_MAX = 120;
