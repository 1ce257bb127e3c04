/**
 * A file name on a device (`dest`, `rmfile`, `setcert`): letters, digits, `.`, `_` and `-`,
 * starting with a letter or digit, at most 64 characters. Never `;` or `=` (they frame a
 * command line's `k=v` pairs) nor `/`.
 */
export const DEVICE_FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const isDeviceFileName = (name: unknown): name is string => typeof name === 'string' && DEVICE_FILE_NAME.test(name);
