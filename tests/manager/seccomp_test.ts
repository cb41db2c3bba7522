/**
 * The seccomp filter, run through a classic-BPF interpreter (the kernel's semantics for the
 * opcodes it uses) on both architectures, and then for real in a sandbox.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  ALLOWED_SOCKET_FAMILIES,
  CLONE_NAMESPACE_FLAGS,
  seccompFilter,
  TIOCSTI,
} from "../../lib/manager/sandbox/seccomp.ts";

const AUDIT = { x86_64: 0xc000003e, aarch64: 0xc00000b7 } as const;
const ALLOW = 0x7fff0000;
const errno = (e: number) => 0x00050000 | e;

/** Runs the filter on one syscall; returns the action word. */
function verdict(
  arch: keyof typeof AUDIT,
  nr: number,
  args: number[] = [],
  auditArch?: number,
  opts: { hostNet?: boolean } = {},
) {
  const prog = new DataView(seccompFilter(arch, opts).buffer);
  const data = new DataView(new ArrayBuffer(64));
  data.setUint32(0, nr, true);
  data.setUint32(4, auditArch ?? AUDIT[arch], true);
  args.forEach((a, i) => data.setUint32(16 + i * 8, a >>> 0, true));
  let pc = 0;
  let acc = 0;
  for (let steps = 0; steps < 4096; steps++) {
    const code = prog.getUint16(pc * 8, true);
    const jt = prog.getUint8(pc * 8 + 2);
    const jf = prog.getUint8(pc * 8 + 3);
    const k = prog.getUint32(pc * 8 + 4, true);
    if (code === 0x20) {
      acc = data.getUint32(k, true);
      pc++;
    } else if (code === 0x15) pc += 1 + (acc === k ? jt : jf);
    else if (code === 0x35) pc += 1 + (acc >= k ? jt : jf);
    else if (code === 0x45) pc += 1 + ((acc & k) !== 0 ? jt : jf);
    else if (code === 0x54) {
      acc = (acc & k) >>> 0;
      pc++;
    } else if (code === 0x06) return k;
    else throw new Error(`unknown opcode ${code}`);
  }
  throw new Error("the filter did not return");
}

Deno.test("seccomp - x86_64: namespaces, mounts, kernel surface refused; ordinary calls allowed", () => {
  for (
    const [nr, name] of [[0, "read"], [1, "write"], [257, "openat"], [59, "execve"], [
      101,
      "ptrace",
    ]]
  ) {
    assert.equal(verdict("x86_64", nr as number), ALLOW, name as string);
  }
  for (const nr of [272, 308, 165, 166, 155, 246, 175, 313, 169, 321, 298, 323, 250, 304]) {
    assert.equal(verdict("x86_64", nr), errno(1), String(nr));
  }
  // clone: a thread or a fork is fine, any namespace flag is not; clone3's flags are unreadable.
  assert.equal(verdict("x86_64", 56, [0x3d0f00]), ALLOW);
  for (const flag of [0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x80]) {
    assert.equal(verdict("x86_64", 56, [0x11 | flag]), errno(1), flag.toString(16));
    assert.ok((CLONE_NAMESPACE_FLAGS & flag) !== 0);
  }
  assert.equal(verdict("x86_64", 435), errno(38));
  assert.equal(verdict("x86_64", 425), errno(38));
  // Kernel AIO contexts come from a host-wide pool (fs.aio-max-nr): none for agents.
  assert.equal(verdict("x86_64", 206), errno(38));
  // ioctl: TIOCSTI and TIOCLINUX only, whatever the high word says (the kernel reads 32 bits).
  assert.equal(verdict("x86_64", 16, [0, TIOCSTI]), errno(1));
  assert.equal(verdict("x86_64", 16, [0, 0x541c]), errno(1));
  assert.equal(verdict("x86_64", 16, [0, 0x5413]), ALLOW);
  // socket families: unix, inet, inet6; no netlink, even with --net host (red team 37 pinned
  // 2 GiB of kernel memory in unread routing replies), no packet sockets.
  for (const family of ALLOWED_SOCKET_FAMILIES) {
    assert.equal(verdict("x86_64", 41, [family, 1]), ALLOW);
  }
  const NETLINK_USERSOCK = 2;
  const host = { hostNet: true };
  for (const opts of [{}, host]) {
    assert.equal(verdict("x86_64", 41, [16, 3, 0], undefined, opts), errno(97));
    assert.equal(verdict("x86_64", 41, [16, 3, NETLINK_USERSOCK], undefined, opts), errno(97));
    for (const family of [17, 38, 40, 44]) {
      assert.equal(verdict("x86_64", 41, [family], undefined, opts), errno(97));
    }
  }
  // In its own network namespace an agent gets TCP only: UDP buffers are a host-wide pool.
  const SOCK_DGRAM = 2;
  const FLAGS = 0x800 | 0x80000; // SOCK_NONBLOCK | SOCK_CLOEXEC
  for (const family of [2, 10]) {
    assert.equal(verdict("x86_64", 41, [family, 1 | FLAGS]), ALLOW);
    assert.equal(verdict("x86_64", 41, [family, SOCK_DGRAM]), errno(1));
    assert.equal(verdict("x86_64", 41, [family, SOCK_DGRAM | FLAGS]), errno(1));
    // With --net host it may resolve names over UDP like any host program: TCP and UDP only.
    for (const proto of [0, 6]) {
      assert.equal(verdict("x86_64", 41, [family, 1 | FLAGS, proto], undefined, host), ALLOW);
    }
    for (const proto of [0, 17]) {
      assert.equal(verdict("x86_64", 41, [family, SOCK_DGRAM, proto], undefined, host), ALLOW);
    }
    // UDP-Lite (136) has no connect hook for the connect guard (red team 37); MPTCP (262),
    // SCTP (132), ICMP (1) and raw sockets are not needed.
    for (const [type, proto] of [[SOCK_DGRAM, 136], [1, 262], [1, 132], [SOCK_DGRAM, 1], [3, 0]]) {
      assert.equal(verdict("x86_64", 41, [family, type, proto], undefined, host), errno(1));
    }
  }
  assert.equal(verdict("x86_64", 41, [1, SOCK_DGRAM]), ALLOW); // unix datagrams stay
  assert.equal(verdict("x86_64", 41, [1, SOCK_DGRAM], undefined, host), ALLOW);
  // listen(2) and bind(2): an agent in its own namespace may; one on the host's network may
  // not (an unbound socket that listens takes a host ephemeral port: red team 34; a unix
  // socket bound in the host's abstract namespace squats a host service's name: red team 37).
  assert.equal(verdict("x86_64", 50), ALLOW);
  assert.equal(verdict("x86_64", 49), ALLOW);
  assert.equal(verdict("x86_64", 50, [], undefined, host), errno(1));
  assert.equal(verdict("x86_64", 49, [], undefined, host), errno(1));
  assert.equal(verdict("aarch64", 201, [], undefined, host), errno(1));
  assert.equal(verdict("aarch64", 200, [], undefined, host), errno(1));
  assert.equal(verdict("aarch64", 201), ALLOW);
  assert.equal(verdict("aarch64", 200), ALLOW);
  // setsockopt(SOL_SOCKET, SO_BROADCAST): refused on the host's network, where a broadcast's
  // copy reaches this host's own listeners (red team 40's routes); every other option stays.
  const SOL_SOCKET = 1;
  const SO_BROADCAST = 6;
  for (const [arch, nr] of [["x86_64", 54], ["aarch64", 208]] as const) {
    assert.equal(verdict(arch, nr, [3, SOL_SOCKET, SO_BROADCAST], undefined, host), errno(1));
    assert.equal(verdict(arch, nr, [3, SOL_SOCKET, SO_BROADCAST]), ALLOW);
    assert.equal(verdict(arch, nr, [3, SOL_SOCKET, 2 /* SO_REUSEADDR */], undefined, host), ALLOW);
    assert.equal(verdict(arch, nr, [3, 6, /* IPPROTO_TCP */ SO_BROADCAST], undefined, host), ALLOW);
    // IPV6_FLOWLABEL_MGR: one machine-wide table (red team 42 took all 3,072 unprivileged
    // labels from a sandbox), refused to every agent; other IPv6 options stay.
    for (const opts of [{}, host]) {
      assert.equal(verdict(arch, nr, [3, 41, 32], undefined, opts), errno(1));
      assert.equal(verdict(arch, nr, [3, 41, 26], undefined, opts), ALLOW); // IPV6_V6ONLY
    }
  }
  // x32 numbers and foreign architectures (32-bit entry points).
  assert.equal(verdict("x86_64", 0x40000000 + 272), errno(1));
  assert.equal(verdict("x86_64", 0x40000000), errno(1));
  assert.equal(verdict("x86_64", 0, [], 0x40000003), errno(1));
});

Deno.test("seccomp - aarch64 has its own numbers", () => {
  assert.equal(verdict("aarch64", 63), ALLOW); // read
  assert.equal(verdict("aarch64", 97), errno(1)); // unshare
  assert.equal(verdict("aarch64", 0), errno(38)); // io_setup
  assert.equal(verdict("aarch64", 220, [0x10000011]), errno(1)); // clone(CLONE_NEWUSER)
  assert.equal(verdict("aarch64", 29, [0, TIOCSTI]), errno(1)); // ioctl
  assert.equal(verdict("aarch64", 198, [17]), errno(97)); // socket(AF_PACKET)
  // The x86_64 table is not applied on aarch64 (272 is an ordinary number there).
  assert.equal(verdict("aarch64", 272), ALLOW);
  assert.equal(verdict("aarch64", 63, [], AUDIT.x86_64), errno(1));
});

Deno.test("seccomp - an architecture without a table is refused with a sentence", () => {
  assert.throws(
    () => seccompFilter("riscv64"),
    (e) => isCotalError(e, "seccomp_unsupported") && /riscv64/.test(e.message),
  );
});
