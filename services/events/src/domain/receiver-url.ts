/**
 * Where deliveries may go (the SSRF guard): a webhook never reaches the platform's own network.
 * An endpoint's URL must be https (http only for local receivers), carry no credentials, and
 * every address its host resolves to must be public unicast (ipaddr.js classifies ranges, the
 * IANA special-purpose registry included); the same check runs on the address each delivery
 * connects to, so a name that later resolves inward (DNS rebinding) is refused at send time.
 * The local fleet also allows loopback and private (RFC 1918, IPv6 unique local) receivers, but
 * never link-local (169.254.0.0/16, fe80::/10: cloud metadata endpoints live there), unspecified
 * (0.0.0.0/8, ::, which reach the machine itself), multicast, broadcast or other special ranges,
 * nor an IPv4 address written as IPv6 unless its IPv4 address is allowed (::ffff:0:0/96 is
 * judged as IPv4; the deprecated IPv4-compatible ::/96 is refused).
 */
import ipaddr from 'ipaddr.js';

export interface ReceiverPolicy {
  /** Loopback and private receivers and plain http are allowed (the local fleet only); link-local and unspecified never are. */
  local: boolean;
}

/** The ranges (ipaddr.js's names) the local fleet adds to public unicast. */
const LOCAL_RANGES: ReadonlySet<string> = new Set(['loopback', 'private', 'uniqueLocal']);

/** The problem with a receiver URL's form, or undefined when the form is fine (addresses are checked apart). */
export function receiverUrlProblem(text: string, policy: ReceiverPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'url must be an absolute URL';
  }
  if (url.protocol !== 'https:' && !(policy.local && url.protocol === 'http:')) return policy.local ? 'url must be http or https' : 'url must be https';
  if (url.username || url.password) return 'url must not carry credentials';
  if (url.hash) return 'url must not have a fragment';
  if (!url.hostname) return 'url must name a host';
  return undefined;
}

/**
 * Whether a receiver may be at this address: public unicast only; the local fleet adds loopback
 * and private addresses. Link-local, unspecified and every other special range are refused in
 * every mode.
 */
export function addressAllowed(address: string, policy: ReceiverPolicy): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = parseAddress(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    // IPv4-compatible addresses (::/96, deprecated: ::a9fe:a9fe is ::169.254.169.254) are no
    // public unicast, whatever ipaddr.js calls them, and some stacks still reach the IPv4
    // address through them: refused in every mode. Only :: (unspecified, refused below) and
    // ::1 (loopback) lie there and are judged as themselves.
    if (v6.match(IPV4_COMPATIBLE) && !UNSPECIFIED_OR_LOOPBACK.has(v6.range())) return false;
    // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is judged as the IPv4 address it is.
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
  }
  const range = parsed.range();
  return range === 'unicast' || (policy.local && LOCAL_RANGES.has(range));
}

const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const UNSPECIFIED_OR_LOOPBACK: ReadonlySet<string> = new Set(['unspecified', 'loopback']);

/**
 * The address, read as its bytes are. ipaddr.js reads `::a.b.c.d` as the IPv4-mapped
 * `::ffff:a.b.c.d`; written so, it is the IPv4-compatible address 0:0:0:0:0:0:ab:cd (and is
 * how inet_ntop writes those, as DNS answers may come).
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const compatible = /^::([^:%]*\.[^:%]*)(%.*)?$/.exec(address);
  if (compatible && ipaddr.IPv4.isValid(compatible[1] as string)) {
    const [a, b, c, d] = ipaddr.IPv4.parse(compatible[1] as string).octets as [number, number, number, number];
    return new ipaddr.IPv6([0, 0, 0, 0, 0, 0, (a << 8) | b, (c << 8) | d]);
  }
  return ipaddr.parse(address);
}
