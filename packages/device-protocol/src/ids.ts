/** Device ids and products of device protocol v1 (docs/protocol.md, "Connecting"). */

/** The two products. */
export type Product = 'light' | 'meter';
export const PRODUCTS: readonly Product[] = ['light', 'meter'];

/** A device id: 12 uppercase hexadecimal characters (client id and username on the broker). */
export const DEVICE_ID_PATTERN = '^[0-9A-F]{12}$';
const DEVICE_ID = new RegExp(DEVICE_ID_PATTERN);

export function isDeviceId(value: unknown): value is string {
  return typeof value === 'string' && DEVICE_ID.test(value);
}

export function assertDeviceId(value: string): void {
  if (!isDeviceId(value)) throw new Error(`device id must be 12 uppercase hex characters, got '${value}'`);
}

export function isProduct(value: unknown): value is Product {
  return value === 'light' || value === 'meter';
}
