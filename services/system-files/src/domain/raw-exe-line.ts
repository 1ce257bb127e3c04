/**
 * A raw MQTT publish to a `sys/exe` topic: what of it is a secret settings write, which must
 * leave only sealed (spec, system rule 5: "on every transport including raw publishes to
 * sys/exe", with no cleartext fallback). Pure.
 */
import { isSecretSettingKey } from '@fleet/contracts';
import { parseSysCommand } from '@fleet/device-protocol';
import { ValidationError } from '@fleet/service-kit';

/**
 * A topic a device reads command lines from: its last two levels are `sys/exe`, whatever comes
 * before them (a device's topic root is a setting, `topicRoot`), bare `sys/exe` included.
 */
export const isSysExeTopic = (topic: string): boolean => topic === 'sys/exe' || topic.endsWith('/sys/exe');

/** The key of a sealed setting: printable ASCII without '|', as the envelope's AAD needs it. */
const SEALABLE_KEY = /^[\x21-\x7b\x7d\x7e]+$/;
/** What a command line may not hold: it is one line of text (C0 control characters and DEL). */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

/** How a raw `sys/exe` payload leaves: as written, or as `set>key=` and the sealed value. */
export type RawExeLine = { kind: 'as_written' } | { kind: 'secret_set'; key: string; value: string };

/**
 * Reads a raw payload for `sys/exe`:
 *
 * - `set>` of a secret key (a key containing pass, pwd, key, token, secret or psk, any case):
 *   `secret_set` with the key (up to the first `=`) and the value (the rest of the line, as the
 *   device reads the one pair of `set`). The value is sealed whatever it looks like: a value that
 *   already starts with `enc1:` is still the partner's plaintext (the PUT route seals it too).
 * - A line that reads as a set but is not the protocol's (the verb in another case or with
 *   blanks around it, `SET>wifiPass=...`) and names a secret key: 400, since the device does not
 *   run it as `set` and sealing it would change what the partner wrote; nothing is sent in clear.
 * - A `set>` carrying a secret pair after another pair: 400 (`set` takes one pair; the secret
 *   would go out in clear).
 * - Anything else: as written, provided it is one line: control characters (U+0000-U+001F,
 *   U+007F) are 400, since a line break would hand the device a second line (`query>` then
 *   `set>wifiPass=...`) that no check above has seen. A secret value may hold them: it leaves sealed.
 */
export function readRawExeLine(payload: string): RawExeLine {
  const command = parseSysCommand(payload);
  const setLike = command.verb.trim().toLowerCase() === 'set';
  const names = (key: string) => setLike && isSecretSettingKey(key);
  if (setLike) {
    const eq = command.rawArgs.indexOf('=');
    const firstKey = eq < 0 ? undefined : command.rawArgs.slice(0, eq);
    const secretPair = command.args.some(([k, v]) => names(k) && v !== undefined);
    if (secretPair && command.verb !== 'set') {
      throw new ValidationError(
        "A secret setting is sent only as the protocol's `set>key=value` (the verb in lower case, nothing around it): this line is not one the device runs as set, so it cannot be sealed; nothing was sent.",
      );
    }
    if (firstKey !== undefined && names(firstKey)) {
      if (!SEALABLE_KEY.test(firstKey)) throw new ValidationError('A secret setting key must be printable ASCII without spaces or |; nothing was sent.');
      return { kind: 'secret_set', key: firstKey, value: command.rawArgs.slice(eq + 1) };
    }
    if (secretPair) throw new ValidationError('`set` takes exactly one key=value pair; send a secret setting on its own line. Nothing was sent.');
  }
  if (CONTROL.test(payload)) throw new ValidationError("A payload for sys/exe is one command line: control characters (U+0000-U+001F, U+007F) cannot be sent there. Nothing was sent.");
  return { kind: 'as_written' };
}
