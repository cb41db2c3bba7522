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
 * (`cotal up` says so). Needs root (CAP_BPF) and a cgroup v2 hierarchy, even on a hybrid host.
 *
 * @module
 */
import { bpf, closeFd, openDir } from "./libc.ts";

const BPF_PROG_LOAD = 5;
const BPF_PROG_ATTACH = 8;
const BPF_PROG_TYPE_CGROUP_SOCK_ADDR = 18;
const BPF_CGROUP_INET4_BIND = 8;
const BPF_CGROUP_INET6_BIND = 9;
/** `union bpf_attr` is larger; the kernel takes any size up to its own and zero past ours. */
const ATTR_SIZE = 128;

/** `r0 = 0; exit`: the verdict "refuse" for every call. */
const REFUSE_ALL = new Uint8Array([
  0xb7,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00, // BPF_ALU64 | BPF_MOV | BPF_K: r0 = 0
  0x95,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00,
  0x00, // BPF_JMP | BPF_EXIT
]);
const LICENSE = new TextEncoder().encode("GPL\0");

function address(buf: Uint8Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

function load(attachType: number): number {
  const attr = new Uint8Array(ATTR_SIZE);
  const v = new DataView(attr.buffer);
  v.setUint32(0, BPF_PROG_TYPE_CGROUP_SOCK_ADDR, true); // prog_type
  v.setUint32(4, REFUSE_ALL.length / 8, true); // insn_cnt
  v.setBigUint64(8, address(REFUSE_ALL), true); // insns
  v.setBigUint64(16, address(LICENSE), true); // license
  v.setUint32(68, attachType, true); // expected_attach_type
  return bpf(BPF_PROG_LOAD, attr, "bpf(BPF_PROG_LOAD) of the bind guard");
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
      const prog = load(type);
      try {
        const attr = new Uint8Array(ATTR_SIZE);
        const v = new DataView(attr.buffer);
        v.setUint32(0, group, true); // target_fd
        v.setUint32(4, prog, true); // attach_bpf_fd
        v.setUint32(8, type, true); // attach_type
        bpf(BPF_PROG_ATTACH, attr, `bpf(BPF_PROG_ATTACH) of the bind guard to ${dir}`);
      } finally {
        closeFd(prog);
      }
    }
  } finally {
    closeFd(group);
  }
}
