/**
 * Which addresses an outbound call (a destination, a failure notification, a provider's API for
 * backfill) may connect to: every address but the link-local ones, the unspecified ones and the
 * cloud metadata services outside link-local, in every form an IPv6 address can carry an IPv4
 * one. Threat model and choices: docs/security.md, "Outbound calls".
 *
 * The address checked is the one connected to: outbound-http.ts calls `addressProblem` from the
 * HTTP client's own DNS lookup and connector, on every connection and every redirect hop.
 */
import ipaddr from 'ipaddr.js';

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

/** Cloud metadata services that are not link-local: Alibaba, Oracle, Azure's wire server, AWS's IPv6 endpoint. */
const METADATA_ADDRESSES = ['100.100.100.200', '192.0.0.192', '168.63.129.16', 'fd00:ec2::254'].map((a) => ipaddr.parse(a).toNormalizedString());

const cidr = (text: string) => ipaddr.parseCIDR(text) as [IPv6, number];
/** IPv6 prefixes whose addresses carry an IPv4 address (RFC 4291, 6052, 8215, 3056, 4380). */
const COMPATIBLE = cidr('::/96');
const NAT64 = cidr('64:ff9b::/96');
const LOCAL_NAT64 = cidr('64:ff9b:1::/48');
const SIX_TO_FOUR = cidr('2002::/16');
const TEREDO = cidr('2001::/32');

/** Why an address is refused (the words of the error), or null. */
export type AddressClass = 'link-local' | 'unspecified' | 'cloud metadata';

const v4 = (bytes: number[]) => new ipaddr.IPv4(bytes);

/** The IPv4 addresses an IPv6 address carries, in every embedding an attacker could use to hide one. */
export function embeddedIPv4(address: IPv6): IPv4[] {
  const bytes = address.toByteArray();
  const last = bytes.slice(12, 16);
  const found: IPv4[] = [];
  if (address.isIPv4MappedAddress()) found.push(address.toIPv4Address());
  // ::a.b.c.d (IPv4-compatible, deprecated but still parsed); :: and ::1 are not IPv4.
  if (address.match(COMPATIBLE) && (bytes[12]! | bytes[13]! | bytes[14]!) !== 0) found.push(v4(last));
  if (address.match(NAT64)) found.push(v4(last));
  if (address.match(LOCAL_NAT64)) {
    // RFC 6052 for a /48 prefix: the IPv4 address in bits 48-63 and 72-87 (bits 64-71 are zero);
    // an operator may also use a /96 inside it (the last 32 bits).
    found.push(v4([bytes[6]!, bytes[7]!, bytes[9]!, bytes[10]!]), v4(last));
  }
  if (address.match(SIX_TO_FOUR)) found.push(v4(bytes.slice(2, 6)));
  if (address.match(TEREDO)) {
    // Teredo: the server's IPv4 in bits 32-63, the client's in the last 32 bits, inverted.
    found.push(v4(bytes.slice(4, 8)), v4(last.map((b) => b ^ 0xff)));
  }
  return found;
}

function classOf(address: IPv4 | IPv6): AddressClass | null {
  const range = address.range();
  if (range === 'linkLocal') return 'link-local';
  if (range === 'unspecified') return 'unspecified';
  if (METADATA_ADDRESSES.includes(address.toNormalizedString())) return 'cloud metadata';
  return null;
}

/** What is wrong with connecting to `address`, as a class and the IPv4 address it hid (if any); null when nothing. */
export function refusedAddress(address: string): { class: AddressClass; embedded: string | null } | null {
  const text = address.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  if (!ipaddr.isValid(text)) return null;
  const parsed = ipaddr.parse(text);
  const direct = classOf(parsed);
  if (direct) return { class: direct, embedded: null };
  // mutant: outbound-embedded-ipv4-ignored
  if (parsed.kind() === 'ipv6') {
    for (const inner of embeddedIPv4(parsed as IPv6)) {
      const hidden = classOf(inner);
      if (hidden) return { class: hidden, embedded: inner.toString() };
    }
  }
  return null;
}

/** The sentence for a refused address: what the host resolved to and why it is not called. */
export function addressProblem(host: string, address: string): string | null {
  const refused = refusedAddress(address);
  if (!refused) return null;
  const shown = host === address ? address : `${host} resolves to ${address}`;
  const hidden = refused.embedded ? ` (it carries the IPv4 address ${refused.embedded})` : '';
  return `${shown}${hidden}, a ${refused.class} address (where clouds serve instance metadata and credentials): not called`;
}
