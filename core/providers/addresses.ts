// Which IP addresses are not on the public internet. A tenant-supplied
// provider URL must never make the server reach loopback, the cloud metadata
// service (169.254.169.254), or the operator's private networks.
import { BlockList, isIP } from 'node:net';

export type AddressClass =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared'
  | 'unique-local'
  | 'multicast'
  | 'reserved';

const DESCRIPTIONS: Readonly<Record<AddressClass, string>> = {
  unspecified: 'an unspecified address',
  loopback: 'a loopback address',
  private: 'a private network address',
  'link-local': 'a link-local address (such as the cloud metadata service)',
  shared: 'a carrier-grade NAT address',
  'unique-local': 'a unique-local IPv6 address',
  multicast: 'a multicast address',
  reserved: 'a reserved address',
};

export const describeClass = (c: AddressClass) => DESCRIPTIONS[c];

type Rule = [network: string, prefix: number];

// Checked in this order; the first list that holds the address names it.
const RULES: ReadonlyArray<[AddressClass, 'ipv4' | 'ipv6', Rule[]]> = [
  ['unspecified', 'ipv4', [['0.0.0.0', 8]]],
  ['loopback', 'ipv4', [['127.0.0.0', 8]]],
  [
    'private',
    'ipv4',
    [
      ['10.0.0.0', 8],
      ['172.16.0.0', 12],
      ['192.168.0.0', 16],
    ],
  ],
  ['link-local', 'ipv4', [['169.254.0.0', 16]]],
  ['shared', 'ipv4', [['100.64.0.0', 10]]],
  ['multicast', 'ipv4', [['224.0.0.0', 4]]],
  // IETF protocol assignments, documentation, the retired 6to4 relay anycast,
  // benchmarking, class E and broadcast.
  [
    'reserved',
    'ipv4',
    [
      ['192.0.0.0', 24],
      ['192.0.2.0', 24],
      ['192.88.99.0', 24],
      ['198.18.0.0', 15],
      ['198.51.100.0', 24],
      ['203.0.113.0', 24],
      ['240.0.0.0', 4],
    ],
  ],
  ['unspecified', 'ipv6', [['::', 128]]],
  ['loopback', 'ipv6', [['::1', 128]]],
  ['unique-local', 'ipv6', [['fc00::', 7]]],
  ['link-local', 'ipv6', [['fe80::', 10]]],
  // Deprecated site-local and the local-use NAT64 prefix reach private networks too.
  [
    'private',
    'ipv6',
    [
      ['fec0::', 10],
      ['64:ff9b:1::', 48],
    ],
  ],
  ['multicast', 'ipv6', [['ff00::', 8]]],
  [
    'reserved',
    'ipv6',
    [
      ['100::', 64],
      ['2001:db8::', 32],
    ],
  ],
];

function listsFor(family: 'ipv4' | 'ipv6'): Array<[AddressClass, BlockList]> {
  return RULES.filter(([, f]) => f === family).map(([name, f, rules]) => {
    const list = new BlockList();
    for (const [network, prefix] of rules) list.addSubnet(network, prefix, f);
    return [name, list];
  });
}
const V4_LISTS = listsFor('ipv4');
const V6_LISTS = listsFor('ipv6');

/** The eight 16-bit groups of a valid IPv6 address (zone id dropped, dotted tail converted). */
function hextets(address: string): number[] {
  let text = address.split('%')[0]!.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/**
 * The IPv4 address an IPv6 one carries to an IPv4 host: mapped (::ffff:a.b.c.d),
 * SIIT-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
 * (64:ff9b::/96) and 6to4 (2002::/16).
 */
function embeddedIPv4(address: string): string | null {
  const h = hextets(address);
  const zeros = (from: number, to: number) => h.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && h[5] === 0xffff) return v4(h[6]!, h[7]!);
  if (zeros(0, 4) && h[4] === 0xffff && h[5] === 0) return v4(h[6]!, h[7]!);
  if (zeros(0, 6)) return v4(h[6]!, h[7]!);
  if (h[0] === 0x64 && h[1] === 0xff9b && zeros(2, 6)) return v4(h[6]!, h[7]!);
  if (h[0] === 0x2002) return v4(h[1]!, h[2]!);
  return null;
}

/** Why an IP address is not public, or null when it is. Throws on something that is not an IP. */
export function classifyAddress(address: string): AddressClass | null {
  const family = isIP(address);
  if (family === 4) return V4_LISTS.find(([, list]) => list.check(address, 'ipv4'))?.[0] ?? null;
  if (family !== 6) throw new TypeError(`not an IP address: ${address}`);
  const plain = address.split('%')[0]!;
  const own = V6_LISTS.find(([, list]) => list.check(plain, 'ipv6'))?.[0];
  if (own) return own;
  const inner = embeddedIPv4(plain);
  return inner === null ? null : classifyAddress(inner);
}
