/**
 * The seccomp filter every sandboxed agent runs under, generated here as a classic BPF program
 * (the format bwrap's `--seccomp <fd>` loads). It is a second layer under the unprivileged uid,
 * the mount allowlist and the namespaces: it takes away kernel surface an agent never needs and
 * that past escapes went through.
 *
 * A syscall allowlist cannot describe "any program an agent may run", so, like Flatpak's and
 * Docker's filters, this one names what is refused: new namespaces of any kind (`unshare`,
 * `setns`, namespace flags on `clone`, and `clone3`, whose flags a filter cannot read), every
 * mount call, kernel modules, kexec, reboot, swap, accounting, the kernel log, raw I/O ports,
 * BPF, perf events, userfaultfd, io_uring, kernel AIO contexts (a host-wide pool an agent could
 * drain), the kernel keyring, file handles, IPv6 flow labels (a machine-wide table), `TIOCSTI` and
 * `TIOCLINUX` (typing into a terminal), socket families other than unix, IPv4 and IPv6, every
 * foreign architecture (32-bit entry points) and x32 syscall numbers; and an agent on the host's
 * network gets TCP and UDP only and may neither bind nor listen (see `SeccompOptions`).
 *
 * @module
 */
import { CotalError } from "../../errors.ts";

const EPERM = 1;
const ENOSYS = 38;
const EAFNOSUPPORT = 97;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const AND_K = 0x54;
const RET_K = 0x06;

// struct seccomp_data: nr @0, arch @4, instruction_pointer @8, args[6] @16 (u64, little-endian).
const OFF_NR = 0;
const OFF_ARCH = 4;
const OFF_ARG0 = 16;
const OFF_ARG1 = 24;
const OFF_ARG2 = 32;

/** CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020080;
/** `ioctl` requests that inject input into a terminal. */
export const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
/** Socket families an agent may open: unix, IPv4 and IPv6 (no netlink, no packet sockets). */
export const ALLOWED_SOCKET_FAMILIES: readonly number[] = Object.freeze([1, 2, 10]);
const AF_INET = 2;
const AF_INET6 = 10;
const IPPROTO_TCP = 6;
const IPPROTO_UDP = 17;
const SOCK_STREAM = 1;
const SOL_SOCKET = 1;
const SOL_IPV6 = 41;
const IPV6_FLOWLABEL_MGR = 32;
const SO_BROADCAST = 6;
const SOCK_DGRAM = 2;

/** Syscall numbers of one architecture; absent names do not exist there. */
interface ArchTable {
  readonly audit: number;
  /** x86_64 also accepts x32 numbers (this bit set); they are refused outright. */
  readonly x32Bit?: number;
  readonly nr: Readonly<Record<string, number>>;
  /** `listen(2)` and `bind(2)`: refused only to an agent on the host's network (see `SeccompOptions`). */
  readonly listen: number;
  readonly bind: number;
  /**
   * `setsockopt(2)`: `IPV6_FLOWLABEL_MGR` is refused to every agent, `SO_BROADCAST` to one on
   * the host's network.
   */
  readonly setsockopt: number;
}

const X86_64: ArchTable = {
  audit: 0xc000003e,
  listen: 50,
  bind: 49,
  setsockopt: 54,
  x32Bit: 0x40000000,
  nr: {
    clone: 56,
    clone3: 435,
    ioctl: 16,
    socket: 41,
    unshare: 272,
    setns: 308,
    mount: 165,
    umount2: 166,
    pivot_root: 155,
    chroot: 161,
    move_mount: 429,
    open_tree: 428,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    kexec_load: 246,
    kexec_file_load: 320,
    init_module: 175,
    finit_module: 313,
    delete_module: 176,
    reboot: 169,
    swapon: 167,
    swapoff: 168,
    acct: 163,
    syslog: 103,
    iopl: 172,
    ioperm: 173,
    quotactl: 179,
    quotactl_fd: 443,
    bpf: 321,
    perf_event_open: 298,
    userfaultfd: 323,
    keyctl: 250,
    add_key: 248,
    request_key: 249,
    open_by_handle_at: 304,
    name_to_handle_at: 303,
    uselib: 134,
    lookup_dcookie: 212,
    nfsservctl: 180,
    fanotify_init: 300,
    vhangup: 153,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    io_setup: 206,
  },
};

const AARCH64: ArchTable = {
  listen: 201,
  bind: 200,
  setsockopt: 208,
  audit: 0xc00000b7,
  nr: {
    clone: 220,
    clone3: 435,
    ioctl: 29,
    socket: 198,
    unshare: 97,
    setns: 268,
    mount: 40,
    umount2: 39,
    pivot_root: 41,
    chroot: 51,
    move_mount: 429,
    open_tree: 428,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    kexec_load: 104,
    kexec_file_load: 294,
    init_module: 105,
    finit_module: 273,
    delete_module: 106,
    reboot: 142,
    swapon: 224,
    swapoff: 225,
    acct: 89,
    syslog: 116,
    quotactl: 60,
    quotactl_fd: 443,
    bpf: 280,
    perf_event_open: 241,
    userfaultfd: 282,
    keyctl: 219,
    add_key: 217,
    request_key: 218,
    open_by_handle_at: 265,
    name_to_handle_at: 264,
    lookup_dcookie: 18,
    nfsservctl: 42,
    fanotify_init: 262,
    vhangup: 58,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    io_setup: 0,
  },
};

/** Refused with ENOSYS rather than EPERM: callers fall back (glibc retries `clone3` as `clone`). */
const NOT_IMPLEMENTED = new Set(["clone3", "io_uring_setup", "io_setup"]);
/** Checked by argument rather than refused whole. */
const BY_ARGUMENT = new Set(["clone", "ioctl", "socket"]);

/** The architectures a filter can be generated for. */
export function seccompSupported(arch: string = Deno.build.arch): boolean {
  return arch === "x86_64" || arch === "aarch64";
}

type Label =
  | "allow"
  | "eperm"
  | "enosys"
  | "eafnosupport"
  | "clone"
  | "ioctl"
  | "socket"
  | "inet"
  | "protocol"
  | "setsockopt"
  | "setsockopt_ipv6";
type Insn =
  | { code: number; k: number; jt?: Label | 0; jf?: Label | 0 }
  | { label: Label };

/** Options of {@linkcode seccompFilter}. */
export interface SeccompOptions {
  /**
   * The agent is on the host's network (`--net host`). In its own network namespace (false,
   * the default) an agent gets stream IP sockets only: it has nothing to reach over UDP, and
   * UDP buffers are charged to no cgroup (a host-wide pool, `udp_mem`). On the host's network
   * (true) it is a client and nothing more:
   * - IP sockets of TCP and UDP only (protocol 0, 6 or 17): UDP-Lite has no connect hook for
   *   its cgroup's connect guard to run in, and reached loopback listeners past it (red team
   *   37); other protocols are not needed.
   * - No `listen(2)`: a socket that listens unbound is handed a free ephemeral port, where no
   *   cgroup hook runs (red team 34 held 28,221 of the host's 28,232 that way).
   * - No `bind(2)`: IP binds are refused by its cgroup's bind guard as well, and a unix socket
   *   bound in the host's abstract namespace took names host services bind and received their
   *   datagrams (red team 37).
   * - No netlink: unread routing replies queue in kernel memory no cgroup is charged for (red
   *   team 37 pinned 2 GiB that way); glibc's resolver and `getaddrinfo` fall back without it.
   * - No `SO_BROADCAST`: without it the kernel refuses a datagram to any broadcast address,
   *   whose copy this host's own listeners receive (the connect guard's address list knows the
   *   subnets at spawn only).
   */
  readonly hostNet?: boolean;
}

/**
 * The filter for `arch` (default this machine's) as bytes of `struct sock_filter` (8 bytes per
 * instruction, host order), ready for bwrap's `--seccomp`. Throws `seccomp_unsupported` on an
 * architecture without a table.
 */
export function seccompFilter(
  arch: string = Deno.build.arch,
  opts: SeccompOptions = {},
): Uint8Array {
  const table = arch === "x86_64" ? X86_64 : arch === "aarch64" ? AARCH64 : undefined;
  if (!table) {
    throw new CotalError(
      "seccomp_unsupported",
      `No seccomp filter is defined for ${arch}; agents there need --isolation deno-only.`,
    );
  }
  const p: Insn[] = [
    { code: LD_W_ABS, k: OFF_ARCH },
    { code: JEQ_K, k: table.audit, jt: 0, jf: "eperm" },
    { code: LD_W_ABS, k: OFF_NR },
  ];
  if (table.x32Bit) p.push({ code: JGE_K, k: table.x32Bit, jt: "eperm", jf: 0 });
  for (const [name, nr] of Object.entries(table.nr)) {
    const target: Label = BY_ARGUMENT.has(name)
      ? name as Label
      : NOT_IMPLEMENTED.has(name)
      ? "enosys"
      : "eperm";
    p.push({ code: JEQ_K, k: nr, jt: target, jf: 0 });
  }
  if (opts.hostNet) {
    p.push({ code: JEQ_K, k: table.listen, jt: "eperm", jf: 0 });
    p.push({ code: JEQ_K, k: table.bind, jt: "eperm", jf: 0 });
  }
  p.push({ code: JEQ_K, k: table.setsockopt, jt: "setsockopt", jf: 0 });
  p.push({ code: RET_K, k: RET_ALLOW });
  // IPv6 flow labels live in one table for the whole machine (3,072 for unprivileged users,
  // no cgroup counts them, each may outlive its socket by 150 s): red team 42 took every one
  // from a sandbox, so no unprivileged process on the host could get one.
  p.push(
    { label: "setsockopt" },
    { code: LD_W_ABS, k: OFF_ARG1 },
    { code: JEQ_K, k: SOL_IPV6, jt: "setsockopt_ipv6", jf: 0 },
    ...(opts.hostNet
      ? [
        { code: JEQ_K, k: SOL_SOCKET, jt: 0, jf: "allow" } as Insn,
        { code: LD_W_ABS, k: OFF_ARG2 },
        { code: JEQ_K, k: SO_BROADCAST, jt: "eperm", jf: "allow" } as Insn,
      ]
      : [{ code: RET_K, k: RET_ALLOW }]),
    { label: "setsockopt_ipv6" },
    { code: LD_W_ABS, k: OFF_ARG2 },
    { code: JEQ_K, k: IPV6_FLOWLABEL_MGR, jt: "eperm", jf: "allow" },
  );
  p.push(
    { label: "clone" },
    { code: LD_W_ABS, k: OFF_ARG0 },
    { code: JSET_K, k: CLONE_NAMESPACE_FLAGS, jt: "eperm", jf: "allow" },
    { label: "ioctl" },
    // The kernel reads the request as a 32-bit int: only the low word can select TIOCSTI.
    { code: LD_W_ABS, k: OFF_ARG1 },
    { code: JEQ_K, k: TIOCSTI, jt: "eperm", jf: 0 },
    { code: JEQ_K, k: TIOCLINUX, jt: "eperm", jf: "allow" },
    { label: "socket" },
    { code: LD_W_ABS, k: OFF_ARG0 },
  );
  for (const family of ALLOWED_SOCKET_FAMILIES) {
    const inet = family === AF_INET || family === AF_INET6;
    p.push({ code: JEQ_K, k: family, jt: inet ? "inet" : "allow", jf: 0 });
  }
  p.push({ code: RET_K, k: RET_ERRNO | EAFNOSUPPORT });
  // The socket type's low nibble (SOCK_NONBLOCK and SOCK_CLOEXEC sit above it).
  p.push(
    { label: "inet" },
    { code: LD_W_ABS, k: OFF_ARG1 },
    { code: AND_K, k: 0xf },
  );
  if (!opts.hostNet) p.push({ code: JEQ_K, k: SOCK_STREAM, jt: "allow", jf: "eperm" });
  else {
    p.push(
      { code: JEQ_K, k: SOCK_STREAM, jt: "protocol", jf: 0 },
      { code: JEQ_K, k: SOCK_DGRAM, jt: "protocol", jf: "eperm" },
      { label: "protocol" },
      { code: LD_W_ABS, k: OFF_ARG2 },
      { code: JEQ_K, k: 0, jt: "allow", jf: 0 },
      { code: JEQ_K, k: IPPROTO_TCP, jt: "allow", jf: 0 },
      { code: JEQ_K, k: IPPROTO_UDP, jt: "allow", jf: "eperm" },
    );
  }
  p.push(
    { label: "allow" },
    { code: RET_K, k: RET_ALLOW },
    { label: "eperm" },
    { code: RET_K, k: RET_ERRNO | EPERM },
    { label: "enosys" },
    { code: RET_K, k: RET_ERRNO | ENOSYS },
    { label: "eafnosupport" },
    { code: RET_K, k: RET_ERRNO | EAFNOSUPPORT },
  );
  return assemble(p);
}

function assemble(program: Insn[]): Uint8Array {
  const at = new Map<Label, number>();
  const code: Exclude<Insn, { label: Label }>[] = [];
  for (const i of program) {
    if ("label" in i) at.set(i.label, code.length);
    else code.push(i);
  }
  const out = new Uint8Array(code.length * 8);
  const view = new DataView(out.buffer);
  const little = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  code.forEach((i, n) => {
    const jump = (to: Label | 0 | undefined): number => {
      if (!to) return 0;
      const off = at.get(to)! - (n + 1);
      if (off < 0 || off > 255) throw new Error(`seccomp: jump to ${to} out of range`);
      return off;
    };
    view.setUint16(n * 8, i.code, little);
    view.setUint8(n * 8 + 2, jump(i.jt));
    view.setUint8(n * 8 + 3, jump(i.jf));
    view.setUint32(n * 8 + 4, i.k >>> 0, little);
  });
  return out;
}
