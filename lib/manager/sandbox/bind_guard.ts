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
 * agent holds at most that many of the host's ports. Needs root (CAP_BPF), a cgroup v2
 * hierarchy (even on a hybrid host) and Linux 5.12 (atomic fetch-and-add).
 *
 * @module
 */
import { closeFd, openDir } from "./libc.ts";
import {
  attachProgram,
  createSlotMap,
  insn,
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

/** `r0 = 0; exit`: the verdict "refuse" for every call. */
const REFUSE_ALL = new Uint8Array([
  ...insn(0xb7, 0, 0, 0, 0), // r0 = 0
  ...insn(0x95, 0, 0, 0, 0), // exit
]);

/** Socket creation: +1, refused (and undone) past `cap`. */
function countCreate(mapFd: number, cap: number): Uint8Array {
  return new Uint8Array([
    ...slot(mapFd),
    ...insn(0x15, 0, 0, 7, 0), // if r0 == 0 goto allow
    ...insn(0xb7, 1, 0, 0, 1), // r1 = 1
    ...insn(0xdb, 0, 1, 0, 0x01), // r1 = atomic_fetch_add((u64 *)r0, r1)
    ...insn(0xa5, 1, 0, 4, cap), // if r1 < cap goto allow
    ...insn(0xb7, 1, 0, 0, -1), // r1 = -1
    ...insn(0xdb, 0, 1, 0, 0x00), // atomic_add((u64 *)r0, r1)
    ...insn(0xb7, 0, 0, 0, 0), // r0 = 0: refuse
    ...insn(0x95, 0, 0, 0, 0), // exit
    ...insn(0xb7, 0, 0, 0, 1), // allow: r0 = 1
    ...insn(0x95, 0, 0, 0, 0), // exit
  ]);
}

/** Socket release: -1. */
function countRelease(mapFd: number): Uint8Array {
  return new Uint8Array([
    ...slot(mapFd),
    ...insn(0x15, 0, 0, 2, 0), // if r0 == 0 goto out
    ...insn(0xb7, 1, 0, 0, -1), // r1 = -1
    ...insn(0xdb, 0, 1, 0, 0x00), // atomic_add((u64 *)r0, r1)
    ...insn(0xb7, 0, 0, 0, 1), // out: r0 = 1
    ...insn(0x95, 0, 0, 0, 0), // exit
  ]);
}

/**
 * Attaches to the cgroup v2 group at `dir` the counting pair that refuses an IPv4 or IPv6
 * socket past `cap` held at once by its processes. Throws `libc_failed` naming the step.
 */
export function capIpSockets(dir: string, cap: number = HOST_NET_MAX_SOCKETS): void {
  const mapFd = createSlotMap(8, "the socket count");
  const group = openDir(dir);
  try {
    const pairs: [Uint8Array, number][] = [
      [countCreate(mapFd, cap), BPF_CGROUP_INET_SOCK_CREATE],
      [countRelease(mapFd), BPF_CGROUP_INET_SOCK_RELEASE],
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
    closeFd(mapFd);
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
