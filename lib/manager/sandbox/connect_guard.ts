/**
 * Where an agent on the host's network (`--net host`) may connect or send, and how often it
 * may open a connection: the allowlist half of its network guard (`bind_guard.ts` is the other).
 *
 * - **The host's own loopback is closed** but for the ports it needs: TCP to its relay to the
 *   broker, UDP to DNS (port 53, where a host resolver such as systemd-resolved listens; not
 *   TCP, which red team 42 flooded the resolver through). Every other
 *   loopback listener (the broker's monitoring port, a sibling's relay, the operator's
 *   databases and dev servers) is refused with EPERM, for TCP connects and UDP sends to any
 *   `127.0.0.0/8`, `0.0.0.0`, `::1`, `::` or IPv4-mapped address of them. Red team 23 flooded a
 *   sibling's relay port; red team 31 took the broker's descriptors through its monitoring port.
 * - **Every local route is closed** the same way, whatever its address: a packet whose route
 *   is local leaves through the loopback device, and one that does is dropped unless it goes
 *   to an allowed port (see `loopbackEgress`). The address list above gives a connect its
 *   EPERM at once; this check needs no list, so an address gained after the spawn, one of a
 *   `local` route's range, or the 65th of a host's addresses is closed too (red team 40).
 * - **New destinations are rate-limited.** A TCP connection the agent closes first holds its
 *   local port in TIME_WAIT for 60 s after the socket is gone, out of reach of the socket
 *   count: red team 36 connected and closed ~470 times a second towards one address and held
 *   all 28,232 ephemeral ports towards it. A UDP datagram to a new on-link address makes a
 *   neighbour entry in tables the whole machine shares (1,024 by default): red team 40 made 300
 *   in 3 ms. Each agent may open {@linkcode HOST_NET_CONNECTS} TCP connections per
 *   {@linkcode CONNECT_WINDOW_NS} window (to any address, its relay and DNS included), and all
 *   of one supervisor's host-network agents together {@linkcode HOST_NET_CONNECTS_ALL}: at most
 *   ~1,900 ports held in TIME_WAIT by one agent, ~7,700 by all (of 28,232). Apart, UDP
 *   connects and addressed sends to new destinations other than the loopback:
 *   {@linkcode HOST_NET_UDP_DESTINATIONS} per window, {@linkcode HOST_NET_UDP_DESTINATIONS_ALL}
 *   for all. A stream of datagrams goes through a connected socket (one count).
 * - **UDP to the loopback is counted per packet**, {@linkcode HOST_NET_DNS_PACKETS} per window
 *   and {@linkcode HOST_NET_DNS_PACKETS_ALL} for all: a host resolver answers a few lookups a
 *   second, not a flood (red team 40 sent it 4 million datagrams in 12 s).
 *
 * The programs are cgroup hooks on `connect(2)` (`BPF_CGROUP_INET4_CONNECT`, `INET6_CONNECT`,
 * which also run for `sendto(MSG_FASTOPEN)`), on an addressed UDP `sendmsg(2)`
 * (`BPF_CGROUP_UDP4_SENDMSG`, `UDP6_SENDMSG`) and on every packet sent
 * (`BPF_CGROUP_INET_EGRESS`). Needs root (CAP_BPF), cgroup v2 and Linux 5.12. Broadcasts are
 * refused by the seccomp filter (no `SO_BROADCAST`).
 *
 * @module
 */
import { closeFd, openDir } from "./libc.ts";
import {
  assemble,
  attachProgram,
  createSlotMap,
  exitWith,
  insn,
  type Item,
  JA,
  JEQ,
  JEQ32,
  JGE,
  JGT,
  JLT,
  JNE,
  JNE32,
  jump,
  label,
  loadProgram,
  PROG_CGROUP_SOCK_ADDR,
  slot,
} from "./bpf.ts";

const BPF_CGROUP_INET4_CONNECT = 10;
const BPF_CGROUP_INET6_CONNECT = 11;
const BPF_CGROUP_UDP4_SENDMSG = 14;
const BPF_CGROUP_UDP6_SENDMSG = 15;
const SOCK_STREAM = 1;

/** The window the connection counts run over: 2 s. */
export const CONNECT_WINDOW_NS = 2_000_000_000;
/** Connections one host-network agent may open per window (32 a second, in bursts of 64). */
export const HOST_NET_CONNECTS = 64;
/** Connections all of one supervisor's host-network agents may open per window together. */
export const HOST_NET_CONNECTS_ALL = 256;
/** The loopback port always open: DNS, for a resolver on the host's loopback. */
export const DNS_PORT = 53;

/** Where a loopback connect or send may go, and which counters a connect draws on. */
export interface ConnectPolicy {
  /** Loopback ports the agent may reach over TCP (its relay's); UDP reaches DNS (53) alone. */
  loopbackPorts: number[];
  /** This host's own addresses (default: read now, {@linkcode ownAddresses}). */
  own?: OwnAddresses;
  /** Connections per window for this agent (tests lower it). */
  connects?: number;
}

/** A port in `user_port`'s layout: network byte order in the low 16 bits, read little-endian. */
function wirePort(port: number): number {
  return ((port & 0xff) << 8) | (port >> 8);
}

/**
 * The IPv4 address in `reg` (as `user_ip4` reads: network order, loaded little-endian) goes to
 * `local` when it is this host's: loopback, `0.0.0.0`, one of `own` (its interfaces' addresses
 * and their subnets' broadcast), limited broadcast or multicast. Clobbers r4.
 */
function ipv4Local(reg: number, own: readonly number[], tag: string): Item[] {
  return [
    insn(0xbf, 4, reg, 0, 0), // r4 = the address
    insn(0x57, 4, 0, 0, 0xff), // r4 &= 0xff: the first octet
    jump(JEQ, 4, 127, "local"),
    insn(0x57, 4, 0, 0, 0xf0), // 224.0.0.0/4: multicast
    // Multicast is refused on every port, allowed ones too: its copy loops back to this host's
    // wildcard listeners through a device no egress check reads (red team 41 sent 246,000
    // datagrams to a resolver on port 53 that way).
    jump(JEQ, 4, 0xe0, "deny"),
    jump(JEQ, reg, 0, "local"), // 0.0.0.0 reaches the host's own listeners
    jump(JEQ32, reg, -1, "deny"), // 255.255.255.255
    ...own.map((a) => jump(JEQ32, reg, a, "local")),
    label(`v4_${tag}_not_local`),
  ];
}

/** ctx in r6; ends at `local` for one of this host's IPv4 addresses, else at `remote`. */
function ipv4Place(own: OwnAddresses): Item[] {
  return [
    insn(0x61, 2, 6, 4, 0), // r2 = ctx->user_ip4 (network order)
    ...ipv4Local(2, own.v4, "plain"),
    jump(JA, 0, 0, "remote"),
  ];
}

/**
 * The same for IPv6: `::1`, `::`, one of `own` (its interfaces' addresses, link-local ones
 * included), multicast, and every IPv4-mapped address {@linkcode ipv4Local} calls local.
 */
function ipv6Place(own: OwnAddresses): Item[] {
  const word = (dst: number, i: number) => insn(0x61, dst, 6, 8 + 4 * i, 0); // user_ip6[i]
  return [
    ...own.v6.flatMap((a, n) => [
      ...a.flatMap((w, i) => [word(2, i), jump(JNE32, 2, w, `own6_${n}`)]),
      jump(JA, 0, 0, "local"),
      label(`own6_${n}`),
    ]),
    word(2, 0),
    insn(0xbf, 4, 2, 0, 0), // r4 = user_ip6[0]
    insn(0x57, 4, 0, 0, 0xff), // its first byte
    jump(JEQ, 4, 0xff, "deny"), // ff00::/8: multicast, refused on every port as IPv4's
    jump(JNE, 2, 0, "remote"),
    word(2, 1),
    jump(JNE, 2, 0, "remote"),
    word(2, 2),
    word(3, 3),
    jump(JEQ32, 2, 0xffff0000 | 0, "mapped"), // ::ffff:a.b.c.d
    jump(JNE, 2, 0, "remote"),
    jump(JEQ, 3, 0, "local"), // ::
    jump(JEQ32, 3, 0x01000000, "local"), // ::1
    jump(JA, 0, 0, "remote"),
    label("mapped"),
    ...ipv4Local(3, own.v4, "mapped"),
    jump(JA, 0, 0, "remote"),
  ];
}

/** This host's own addresses as the programs compare them (see {@linkcode ownAddresses}). */
export interface OwnAddresses {
  /** IPv4 addresses and subnet broadcasts, each as `user_ip4` reads it. */
  v4: number[];
  /** IPv6 addresses, each as the four words of `user_ip6`. */
  v6: number[][];
}

/**
 * The most own addresses compared at connect time, for an immediate EPERM; a host with more
 * still has each closed by the loopback egress check (a connect to one then times out).
 */
export const MAX_OWN_ADDRESSES = 64;

/** Four bytes in network order as a little-endian load of them reads. */
function wire32(b: readonly number[]): number {
  return (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) | 0;
}

function ipv6Bytes(text: string): number[] | undefined {
  const bare = text.replace(/%.*$/, "");
  const [head, tail] = bare.includes("::") ? bare.split("::") : [bare, undefined];
  const part = (s: string | undefined) => (s ? s.split(":") : []);
  const h = part(head);
  const t = part(tail);
  const missing = 8 - h.length - t.length;
  if (tail === undefined ? missing !== 0 : missing < 0) return undefined;
  const groups = [...h, ...Array(tail === undefined ? 0 : missing).fill("0"), ...t];
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return undefined;
  return groups.flatMap((g) => {
    const v = parseInt(g, 16);
    return [v >> 8, v & 0xff];
  });
}

/**
 * This host's own addresses now (`Deno.networkInterfaces()`): what a connect to reaches the
 * host's listeners bound to every address. Read at each spawn, and every
 * {@linkcode ADDRESS_POLL_MS} while a guard lives: an address the host gains later (a VPN, a
 * container bridge, a new DHCP lease) is put into every live guard (see
 * {@linkcode refreshConnectGuards}).
 */
export function ownAddresses(
  interfaces: Deno.NetworkInterfaceInfo[] = Deno.networkInterfaces(),
): OwnAddresses {
  const v4 = new Set<number>();
  const v6 = new Map<string, number[]>();
  for (const i of interfaces) {
    if (i.family === "IPv4") {
      const b = i.address.split(".").map(Number);
      const m = i.netmask.split(".").map(Number);
      if (b.length !== 4 || m.length !== 4 || [...b, ...m].some((x) => !(x >= 0 && x <= 255))) {
        continue;
      }
      if (b[0] === 127) continue; // the loopback block is closed whole
      v4.add(wire32(b));
      v4.add(wire32(b.map((x, k) => x | (~m[k] & 0xff))));
    } else {
      const b = ipv6Bytes(i.address);
      if (!b || b.every((x, k) => x === (k === 15 ? 1 : 0))) continue; // ::1 is closed anyway
      const words = [0, 4, 8, 12].map((k) => wire32(b.slice(k, k + 4)));
      v6.set(words.join(","), words);
    }
  }
  // Past the cap the rest are left to the loopback egress check, which needs no list (red team
  // 40: a host past 64 addresses refused every spawn and kept its poll from ever updating).
  const list4 = [...v4].slice(0, MAX_OWN_ADDRESSES);
  return { v4: list4, v6: [...v6.values()].slice(0, MAX_OWN_ADDRESSES - list4.length) };
}

/**
 * At `local`: TCP to the listed ports (the relay's) and UDP to DNS are allowed, the rest
 * refused. A TCP connect is counted as any other (red team 37 churned 400,000 connections
 * through an uncounted port); UDP to DNS makes no neighbour entry, and its packets are counted
 * on the way out (`loopbackEgress`). TCP to DNS is refused: one connection carries any number
 * of queries, and held ones fill a resolver's connection slots (red team 42 sent 1.4 million
 * queries in 3 s and held 128 connections, systemd-resolved's all); a lookup whose UDP answer
 * is truncated fails instead.
 */
function loopbackPorts(tcpPorts: number[]): Item[] {
  return [
    label("local"),
    insn(0x61, 2, 6, 24, 0), // r2 = ctx->user_port
    insn(0x61, 3, 6, 32, 0), // r3 = ctx->type
    jump(JEQ, 3, SOCK_STREAM, "local_tcp"),
    jump(JEQ, 2, wirePort(DNS_PORT), "allow"),
    jump(JA, 0, 0, "deny"),
    label("local_tcp"),
    ...tcpPorts.map((p) => jump(JEQ, 2, wirePort(p), "tcp")),
    jump(JA, 0, 0, "deny"),
  ];
}

/**
 * One fixed-window counter in a 16-byte slot (window start in ns, count): a new window when the
 * last began `CONNECT_WINDOW_NS` ago, then +1, refused at `cap`. Two CPUs opening a window at
 * once may each reset it: a few more connects than `cap`, never unbounded.
 */
function counted(mapFd: number, cap: number, tag: string): Item[] {
  return [
    slot(mapFd),
    jump(JEQ, 0, 0, "deny"), // no slot: fail closed (an array's slot 0 always exists)
    insn(0xbf, 7, 0, 0, 0), // r7 = the slot
    insn(0x85, 0, 0, 0, 5), // r0 = bpf_ktime_get_ns()
    insn(0x79, 1, 7, 0, 0), // r1 = slot->start
    insn(0xbf, 2, 0, 0, 0), // r2 = now
    insn(0x1f, 2, 1, 0, 0), // r2 -= start
    jump(JLT, 2, CONNECT_WINDOW_NS, `in_${tag}`),
    insn(0x7b, 7, 0, 0, 0), // slot->start = now
    insn(0x7a, 7, 0, 8, 0), // slot->count = 0
    label(`in_${tag}`),
    insn(0xb7, 1, 0, 0, 1), // r1 = 1
    insn(0xdb, 7, 1, 8, 0x01), // r1 = atomic_fetch_add(&slot->count, r1)
    jump(JGE, 1, cap, "deny"),
  ];
}

/** `BPF_PROG_TYPE_CGROUP_SKB`: every packet a group's sockets send or receive. */
const PROG_CGROUP_SKB = 8;
const BPF_CGROUP_INET_EGRESS = 1;
/** The loopback device's index, the same in every network namespace. */
const LOOPBACK_IFINDEX = 1;
const IPPROTO_TCP = 6;
const IPPROTO_UDP = 17;
const BPF_FUNC_SKB_LOAD_BYTES = 26;
/**
 * New UDP destinations (connects and addressed sends, the loopback's aside) one agent may open
 * per window: each may make a neighbour entry (two for IPv6) in the machine-wide tables.
 */
export const HOST_NET_UDP_DESTINATIONS = 16;
/** The same for all of one supervisor's host-network agents together. */
export const HOST_NET_UDP_DESTINATIONS_ALL = 64;
/** UDP packets to the host's loopback (DNS) one agent may send per window. */
export const HOST_NET_DNS_PACKETS = 64;
/** The same for all of one supervisor's host-network agents together. */
export const HOST_NET_DNS_PACKETS_ALL = 256;

/**
 * The route-based half of the guard, on every packet the group's sockets send
 * (`BPF_CGROUP_INET_EGRESS`): a packet whose route is local leaves through the loopback device
 * whatever its address (an interface's, one of a `local` route's whole range, an address the
 * host gained a moment ago), so one that does is dropped unless it is plain TCP to a relay
 * port or plain UDP to DNS; and UDP ones (DNS to a resolver on the loopback) are counted per packet, which
 * a connected socket's sends never were (red team 40 flooded the resolver with 4 million
 * datagrams in 12 s through one `connect`). An IPv4 header with options, a fragment, or an
 * IPv6 extension header is dropped on this device: the ports could not be read.
 */
function loopbackEgress(tcpPorts: number[], dnsOwn: number, dnsAll: number): Uint8Array {
  const load = (len: number): Item[] => [
    insn(0xbf, 1, 6, 0, 0), // r1 = skb
    insn(0xb7, 2, 0, 0, 0), // r2 = 0: the network header
    insn(0xbf, 3, 10, 0, 0), // r3 = r10
    insn(0x07, 3, 0, 0, -48), // r3 += -48
    insn(0xb7, 4, 0, 0, len), // r4 = len
    insn(0x85, 0, 0, 0, BPF_FUNC_SKB_LOAD_BYTES),
    jump(JNE, 0, 0, "deny"),
  ];
  return assemble([
    insn(0xbf, 6, 1, 0, 0), // r6 = skb
    insn(0x61, 2, 6, 40, 0), // r2 = skb->ifindex
    jump(JNE, 2, LOOPBACK_IFINDEX, "allow"),
    insn(0x61, 2, 6, 16, 0), // r2 = skb->protocol (network order)
    jump(JEQ, 2, 0x0008, "v4"), // ETH_P_IP
    jump(JEQ, 2, 0xdd86, "v6"), // ETH_P_IPV6
    jump(JA, 0, 0, "deny"),
    label("v4"),
    ...load(24), // the header without options, then the ports
    insn(0x71, 2, 10, -48, 0), // r2 = version and header length
    jump(JNE, 2, 0x45, "deny"),
    insn(0x69, 2, 10, -42, 0), // r2 = flags and fragment offset
    insn(0x57, 2, 0, 0, 0xff3f), // more fragments, or an offset
    jump(JNE, 2, 0, "deny"),
    insn(0x71, 8, 10, -39, 0), // r8 = protocol
    insn(0x69, 9, 10, -26, 0), // r9 = destination port
    jump(JA, 0, 0, "ports"),
    label("v6"),
    ...load(44),
    insn(0x71, 2, 10, -48, 0),
    insn(0x57, 2, 0, 0, 0xf0), // version
    jump(JNE, 2, 0x60, "deny"),
    insn(0x71, 8, 10, -42, 0), // r8 = next header
    insn(0x69, 9, 10, -6, 0), // r9 = destination port
    label("ports"),
    jump(JEQ, 8, IPPROTO_TCP, "tcp_ports"),
    jump(JNE, 8, IPPROTO_UDP, "deny"),
    jump(JNE, 9, wirePort(DNS_PORT), "deny"),
    // A segmented UDP send (UDP_SEGMENT, by option or per call) is one packet here and many
    // datagrams to the listener: red team 41 got 64 through for each one counted. A resolver's
    // client never segments.
    insn(0x61, 2, 6, 164, 0), // r2 = skb->gso_segs
    jump(JGT, 2, 1, "deny"),
    ...counted(dnsOwn, HOST_NET_DNS_PACKETS, "dns_own"),
    ...counted(dnsAll, HOST_NET_DNS_PACKETS_ALL, "dns_all"),
    jump(JA, 0, 0, "allow"),
    label("tcp_ports"),
    ...tcpPorts.map((p) => jump(JEQ, 9, wirePort(p), "allow")),
    jump(JA, 0, 0, "deny"),
    label("allow"),
    ...exitWith(1),
    label("deny"),
    ...exitWith(0),
  ]);
}

/**
 * One hook's program: `place` sends this host's addresses to `local` (allowed ports only) and
 * the rest to `remote`, where a TCP connect draws on `tcp` counters and a UDP connect or send on
 * `udp` ones.
 */
function program(place: Item[], ports: number[], tcp: Item[], udp: Item[]): Uint8Array {
  return assemble([
    insn(0xbf, 6, 1, 0, 0), // r6 = ctx
    ...place,
    ...loopbackPorts(ports),
    label("remote"),
    insn(0x61, 2, 6, 32, 0), // r2 = ctx->type
    jump(JEQ, 2, SOCK_STREAM, "tcp"),
    ...udp,
    jump(JA, 0, 0, "allow"),
    label("tcp"),
    ...tcp,
    label("allow"),
    ...exitWith(1),
    label("deny"),
    ...exitWith(0),
  ]);
}

// Counters for every host-network agent of this process: made on first use, kept open.
let sharedCounter: number | undefined;
let sharedUdp: number | undefined;
let sharedDns: number | undefined;

/** How often the host's addresses are read again while a guard lives. */
export const ADDRESS_POLL_MS = 2_000;

/** A live guard: its group, its allowed ports and its own connection count (kept open). */
interface LiveGuard {
  readonly ports: number[];
  readonly own: number;
  readonly udp: number;
  readonly dns: number;
  readonly connects: number;
}

const live = new Map<string, LiveGuard>();
let lastRead: string | undefined;
let poll: ReturnType<typeof setInterval> | undefined;

function attachAll(dir: string, g: LiveGuard, host: OwnAddresses): void {
  const group = openDir(dir);
  try {
    // Every new destination is counted: a TCP connect (its port sits in TIME_WAIT after), and
    // apart, a UDP connect or addressed send (each may make a neighbour entry, two for IPv6, in
    // tables the whole machine shares: red team 40 made 300 in 3 ms).
    const tcp = [
      ...counted(g.own, g.connects, "own"),
      ...counted(sharedCounter!, HOST_NET_CONNECTS_ALL, "all"),
    ];
    const udp = [
      ...counted(g.udp, HOST_NET_UDP_DESTINATIONS, "udp_own"),
      ...counted(sharedUdp!, HOST_NET_UDP_DESTINATIONS_ALL, "udp_all"),
    ];
    const place = [ipv4Place(host), ipv6Place(host)];
    const programs: [Uint8Array, number, number][] = [
      [program(place[0], g.ports, tcp, udp), BPF_CGROUP_INET4_CONNECT, PROG_CGROUP_SOCK_ADDR],
      [program(place[1], g.ports, tcp, udp), BPF_CGROUP_INET6_CONNECT, PROG_CGROUP_SOCK_ADDR],
      [program(place[0], g.ports, tcp, udp), BPF_CGROUP_UDP4_SENDMSG, PROG_CGROUP_SOCK_ADDR],
      [program(place[1], g.ports, tcp, udp), BPF_CGROUP_UDP6_SENDMSG, PROG_CGROUP_SOCK_ADDR],
      [loopbackEgress(g.ports, g.dns, sharedDns!), BPF_CGROUP_INET_EGRESS, PROG_CGROUP_SKB],
    ];
    // Attached without flags, a program replaces the group's one of its type at once: a
    // refresh leaves no moment without a guard.
    for (const [insns, type, progType] of programs) {
      const prog = loadProgram(progType, insns, type, "the connect guard");
      try {
        attachProgram(group, prog, type, `the connect guard to ${dir}`);
      } finally {
        closeFd(prog);
      }
    }
  } finally {
    closeFd(group);
  }
}

/**
 * Puts `host` (default: this host's addresses now) into every live guard. Polled every
 * {@linkcode ADDRESS_POLL_MS} while a guard lives, acting only when the addresses changed; a
 * guard the kernel refuses to update keeps the addresses it had (its group may be going away).
 */
export function refreshConnectGuards(host?: OwnAddresses): void {
  let now: OwnAddresses;
  try {
    now = host ?? ownAddresses();
  } catch {
    return; // the host's interfaces could not be read: the guards keep what they have
  }
  for (const [dir, g] of live) {
    try {
      attachAll(dir, g, now);
    } catch {
      // Its group is gone or going; releaseConnectGuard forgets it.
    }
  }
}

function pollAddresses(): void {
  let text: string;
  try {
    text = JSON.stringify(ownAddresses());
  } catch {
    return;
  }
  if (text === lastRead) return;
  lastRead = text;
  refreshConnectGuards();
}

/** Forgets the guard of `dir` (its group is being removed) and closes its connection count. */
export function releaseConnectGuard(dir: string): void {
  const g = live.get(dir);
  if (!g) return;
  live.delete(dir);
  closeFd(g.own);
  closeFd(g.udp);
  closeFd(g.dns);
  if (live.size === 0 && poll !== undefined) {
    clearInterval(poll);
    poll = undefined;
    // The next guard starts from its own reading (red team 40: a reading kept from an earlier
    // agent hid an address gained since from the next one's poll).
    lastRead = undefined;
  }
}

/**
 * Attaches the connect and send guard to the cgroup v2 group at `dir`: loopback closed but for
 * `policy.loopbackPorts` and DNS, connections counted per agent and across this process's
 * agents. The guard stays live, the host's addresses put into it as they change, until
 * {@linkcode releaseConnectGuard}. Throws `libc_failed` naming the step the kernel refused.
 */
export function guardConnects(dir: string, policy: ConnectPolicy): void {
  const host = policy.own ?? ownAddresses();
  sharedCounter ??= createSlotMap(16, "the shared connection count");
  sharedUdp ??= createSlotMap(16, "the shared UDP destination count");
  sharedDns ??= createSlotMap(16, "the shared loopback packet count");
  const maps: number[] = [];
  try {
    for (const what of ["connection", "UDP destination", "loopback packet"]) {
      maps.push(createSlotMap(16, `the ${what} count`));
    }
    const [own, udp, dns] = maps;
    const g: LiveGuard = {
      ports: [...new Set(policy.loopbackPorts)],
      own,
      udp,
      dns,
      connects: policy.connects ?? HOST_NET_CONNECTS,
    };
    attachAll(dir, g, host);
    releaseConnectGuard(dir);
    live.set(dir, g);
  } catch (err) {
    for (const fd of maps) closeFd(fd);
    throw err;
  }
  if (poll === undefined) {
    lastRead ??= policy.own ? undefined : JSON.stringify(host);
    const timer = setInterval(pollAddresses, ADDRESS_POLL_MS);
    Deno.unrefTimer(timer);
    poll = timer;
  }
}
