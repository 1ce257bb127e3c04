/**
 * What a broker accepts as an MQTT UTF-8 string (topic names and filters; MQTT 3.1.1 1.5.3,
 * MQTT 5 1.5.4). Mosquitto closes the connection of a client that sends a topic with any of
 * the code points below, so a topic from outside the platform is checked before it is
 * published, never after the broker has dropped the platform's connection.
 */

/** The longest encoded MQTT string (a two-byte length prefix). */
export const MAX_MQTT_STRING_BYTES = 65_535;

/**
 * Why a string cannot be sent as an MQTT topic, or undefined when it can: U+0000, control
 * characters (U+0001–U+001F, U+007F–U+009F), non-characters (U+FDD0–U+FDEF and U+xFFFE /
 * U+xFFFF of every plane), unpaired surrogates, or more than 65,535 bytes as UTF-8.
 */
export function mqttStringProblem(value: string): string | undefined {
  for (let i = 0; i < value.length; i += 1) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return 'an unpaired surrogate';
      const codePoint = value.codePointAt(i) as number;
      if ((codePoint & 0xfffe) === 0xfffe) return `the non-character ${hex(codePoint)}`;
      i += 1;
      continue;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return 'an unpaired surrogate';
    if (unit === 0) return 'U+0000';
    if (unit <= 0x1f || (unit >= 0x7f && unit <= 0x9f)) return `the control character ${hex(unit)}`;
    if ((unit >= 0xfdd0 && unit <= 0xfdef) || unit === 0xfffe || unit === 0xffff) return `the non-character ${hex(unit)}`;
  }
  if (Buffer.byteLength(value, 'utf8') > MAX_MQTT_STRING_BYTES) return `more than ${MAX_MQTT_STRING_BYTES} bytes`;
  return undefined;
}

const hex = (codePoint: number): string => `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;
