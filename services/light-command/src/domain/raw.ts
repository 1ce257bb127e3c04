import { capViolation, parsePayload, WireError, type WirePayload } from '@fleet/light-wire';
import { CommandInputError } from './catalog';

/**
 * A raw command: the wire grammar is always enforced; the availability caps too, unless the
 * partner holds relaxed_caps. The payload is sent exactly as given (this only checks it).
 */
export function checkRawCommand(channel: string, payload: string, relaxedCaps: boolean): WirePayload {
  let parsed: WirePayload;
  try {
    parsed = parsePayload(channel, payload);
  } catch (err) {
    if (err instanceof WireError) {
      if (err.field === 'channel') throw new CommandInputError('channel', err.message);
      throw new CommandInputError('payload', `payload: ${err.message}`);
    }
    throw err;
  }
  if (!relaxedCaps) {
    const cap = capViolation(parsed);
    if (cap) throw new CommandInputError('payload', `payload: ${cap.message}; the relaxed_caps permission lifts availability caps on raw commands`);
  }
  return parsed;
}
