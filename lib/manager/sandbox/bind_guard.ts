/**
 * An agent on the host's network (`--net host`) may connect out but never bind an IP port.
 * Bound, it could take the broker's port while the broker restarts and sit in the middle of
 * every daemon's session: NATS's nonce proves the client to the server, never the server to
 * the client, so a squatter that hands each client the real broker's nonce relays real logins
 * and adds its own messages (red team 33 purged the DM stream as the delivery daemon).
 *
 * The kernel's hook for this is a cgroup program on `bind(2)` (`BPF_CGROUP_INET4_BIND`,
 * `INET6_BIND`: what systemd's `SocketBindDeny=` attaches). The one here returns "refuse" for
 * every IPv4 and IPv6 bind of every process in the agent's group: `bind` fails with EPERM.
 * Connecting still binds implicitly (no hook runs), unix sockets are untouched, and a socket
 * that listens unbound gets a port from the ephemeral range, where a broker must not listen
 * (`cotal up` says so), and its seccomp filter refuses `listen(2)` besides.
 *
 * Connecting and sending still take ports: a socket that connects or sends unbound is handed a
 * free ephemeral port, again with no hook on the way, and red team 35 held all 28,232 of the
 * host's from unbound sockets that connected (TCP) or sent (UDP): every port-0 bind on the host
 * failed, and after a broker crash nothing could reach the broker again. So the same group also
 * counts its IPv4 and IPv6 sockets (`BPF_CGROUP_INET_SOCK_CREATE` adds one, `..._RELEASE` takes
 * it back, in a one-slot map) and refuses a new one past {@linkcode HOST_NET_MAX_SOCKETS}: one
 * agent holds at most that many of the host's ports, and all of one supervisor's such agents
 * together at most {@linkcode HOST_NET_MAX_SOCKETS_ALL}. Needs root (CAP_BPF), a cgroup v2
 * hierarchy (even on a hybrid host) and Linux 5.12 (atomic fetch-and-add).
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
  JEQ,
  JGE,
  jump,
  label,
  loadProgram,
  PROG_CGROUP_SOCK,
  PROG_CGROUP_SOCK_ADDR,
  slot,
} from "./bpf.ts";

const BPF_CGROUP_INET_SOCK_CREATE = 2;
const BPF_CGROUP_INET4_BIND = 8;
const BPF_CGROUP_INET6_BIND = 9;
const BPF_CGROUP_INET_SOCK_RELEASE = 34;

/**
 * The most IPv4 and IPv6 sockets an agent on the host's network holds at once, all its
 * processes together: far above what a harness talking to its model provider opens, far below
 * the ~28,000 ports of the kernel's default ephemeral range.
 */
export const HOST_NET_MAX_SOCKETS = 1024;
/**
 * The most IPv4 and IPv6 sockets all of one supervisor's host-network agents hold at once: a
 * few colluding agents, each within its own cap, still leave most of the ephemeral range.
 */
export const HOST_NET_MAX_SOCKETS_ALL = 4096;

/** `r0 = 0; exit`: the verdict "refuse" for every call. */
const REFUSE_ALL = new Uint8Array([
  ...insn(0xb7, 0, 0, 0, 0), // r0 = 0
  ...insn(0x95, 0, 0, 0, 0), // exit
]);

/** Socket creation: +1 on both counts, refused (and undone) past either cap. */
function countCreate(own: number, shared: number, cap: number, capAll: number): Uint8Array {
  return assemble([
    slot(own),
    jump(JEQ, 0, 0, "refuse"), // no slot: fail closed (an array's slot 0 always exists)
    insn(0xbf, 7, 0, 0, 0), // r7 = own slot
    slot(shared),
    jump(JEQ, 0, 0, "refuse"),
    insn(0xbf, 8, 0, 0, 0), // r8 = shared slot
    insn(0xb7, 1, 0, 0, 1), // r1 = 1
    insn(0xdb, 7, 1, 0, 0x01), // r1 = atomic_fetch_add(own, r1)
    jump(JGE, 1, cap, "undo_own"),
    insn(0xb7, 1, 0, 0, 1), // r1 = 1
    insn(0xdb, 8, 1, 0, 0x01), // r1 = atomic_fetch_add(shared, r1)
    jump(JGE, 1, capAll, "undo_both"),
    ...exitWith(1),
    label("undo_both"),
    insn(0xb7, 1, 0, 0, -1), // r1 = -1
    insn(0xdb, 8, 1, 0, 0x00), // atomic_add(shared, r1)
    label("undo_own"),
    insn(0xb7, 1, 0, 0, -1), // r1 = -1
    insn(0xdb, 7, 1, 0, 0x00), // atomic_add(own, r1)
    label("refuse"),
    ...exitWith(0),
  ]);
}

/** Socket release: -1 on both counts. */
function countRelease(own: number, shared: number): Uint8Array {
  const minusOne = (map: number, tag: string): Item[] => [
    slot(map),
    jump(JEQ, 0, 0, tag),
    insn(0xb7, 1, 0, 0, -1), // r1 = -1
    insn(0xdb, 0, 1, 0, 0x00), // atomic_add(slot, r1)
    label(tag),
  ];
  return assemble([...minusOne(own, "own"), ...minusOne(shared, "shared"), ...exitWith(1)]);
}

// One count for every host-network agent of this process: made on first use, kept open.
let sharedCount: number | undefined;

/**
 * Attaches to the cgroup v2 group at `dir` the counting pair that refuses an IPv4 or IPv6
 * socket past `cap` held at once by its processes, or past `capAll` held by all the groups of
 * this process guarded so. Throws `libc_failed` naming the step.
 */
export function capIpSockets(
  dir: string,
  cap: number = HOST_NET_MAX_SOCKETS,
  capAll: number = HOST_NET_MAX_SOCKETS_ALL,
): void {
  sharedCount ??= createSlotMap(8, "the shared socket count");
  const own = createSlotMap(8, "the socket count");
  const group = openDir(dir);
  try {
    const pairs: [Uint8Array, number][] = [
      [countCreate(own, sharedCount, cap, capAll), BPF_CGROUP_INET_SOCK_CREATE],
      [countRelease(own, sharedCount), BPF_CGROUP_INET_SOCK_RELEASE],
    ];
    for (const [insns, type] of pairs) {
      const prog = loadProgram(PROG_CGROUP_SOCK, insns, type, "the socket count");
      try {
        attachProgram(group, prog, type, `the socket count to ${dir}`);
      } finally {
        closeFd(prog);
      }
    }
  } finally {
    closeFd(group);
    closeFd(own);
  }
}

/**
 * Attaches the refuse-every-IP-bind program to the cgroup v2 group at `dir`, for IPv4 and IPv6.
 * It stays attached for the group's life (the group holds it; removing the group drops it).
 * Throws `libc_failed` naming the step the kernel refused.
 */
export function denyIpBinds(dir: string): void {
  const group = openDir(dir);
  try {
    for (const type of [BPF_CGROUP_INET4_BIND, BPF_CGROUP_INET6_BIND]) {
      const prog = loadProgram(PROG_CGROUP_SOCK_ADDR, REFUSE_ALL, type, "the bind guard");
      try {
        attachProgram(group, prog, type, `the bind guard to ${dir}`);
      } finally {
        closeFd(prog);
      }
    }
  } finally {
    closeFd(group);
  }
}
