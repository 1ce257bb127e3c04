/** A sensor id (`tdl_id`): 1–64 letters, digits, `_`, `-`, `.`, `:` (spec, "Sensor attachment"). */
export const SENSOR_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

export const isSensorId = (v: unknown): v is string => typeof v === 'string' && SENSOR_ID_PATTERN.test(v);

/** A sensor label a partner may give: 1–120 characters, or null. */
export const LABEL_MAX = 120;
