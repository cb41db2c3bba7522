/**
 * The few libc calls the supervisor needs below Deno's file API: descriptor hygiene before a
 * spawn (close-on-exec on everything, one inheritable pipe for bwrap's seccomp program and its
 * sync fds), advisory locks that die with their holder, signals, and reads and writes of
 * `/proc` and `/sys` files (Deno refuses those paths without `--allow-all`, even under a bare
 * `--allow-read`). Loaded on first use through `--allow-ffi`, which only the supervisor's row has.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";

const O_RDONLY = 0;
const O_WRONLY = 1;
const O_RDWR = 2;
const O_CREAT = 0o100;
const O_NONBLOCK = 0o4000;
const O_CLOEXEC = 0o2000000;
// O_NOFOLLOW differs between the two architectures Cotal runs on.
const O_NOFOLLOW = Deno.build.arch === "aarch64" ? 0o100000 : 0o400000;
const F_GETFD = 1;
const F_SETFD = 2;
const F_GETFL = 3;
const F_SETFL = 4;
const FD_CLOEXEC = 1;
const CLOSE_RANGE_CLOEXEC = 4;
const LOCK_EX = 2;
const LOCK_NB = 4;
const EINTR = 4;
const EBADF = 9;
const ENOENT = 2;
const EEXIST = 17;
const ENOSYS = 38;
const ELOOP = 40;

const SYMBOLS = {
  open: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  pipe2: { parameters: ["buffer", "i32"], result: "i32" },
  // fcntl is variadic; its third argument is an int, passed like a fixed one on x86_64/aarch64.
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  flock: { parameters: ["i32", "i32"], result: "i32" },
  kill: { parameters: ["i32", "i32"], result: "i32" },
  mkdir: { parameters: ["buffer", "u32"], result: "i32" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "buffer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  rmdir: { parameters: ["buffer"], result: "i32" },
  close_range: { parameters: ["u32", "u32", "i32"], result: "i32", optional: true },
  // syscall(2) is variadic; its arguments are passed like fixed ones on x86_64/aarch64.
  syscall: { parameters: ["i64", "i64", "buffer", "i64"], result: "i64" },
  // The same syscall(2) with four arguments, for openat2 (dirfd, path, how, size).
  syscall4: {
    name: "syscall",
    parameters: ["i64", "i64", "buffer", "buffer", "i64"],
    result: "i64",
  },
  __errno_location: { parameters: [], result: "pointer" },
  // stdio's own stream for fd 0, whose lock is the process-wide one below.
  stdin: { type: "pointer" },
  ftrylockfile: { parameters: ["pointer"], result: "i32" },
  funlockfile: { parameters: ["pointer"], result: "void" },
} as const;

type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
let lib: Libc | undefined;

function libc(): Libc {
  if (lib) return lib;
  try {
    lib = Deno.dlopen("libc.so.6", SYMBOLS).symbols;
  } catch (err) {
    throw new CotalError(
      "libc_unavailable",
      `The supervisor cannot load libc.so.6 (${
        (err as Error).message
      }); it needs --allow-ffi and a glibc Linux.`,
    );
  }
  return lib;
}

/** The calling thread's errno (every call here runs on the main thread). */
function errno(): number {
  const p = libc().__errno_location();
  return p ? new Deno.UnsafePointerView(p).getInt32() : 0;
}

function cstr(s: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${s}\0`);
}

function fail(what: string): never {
  throw new CotalError("libc_failed", `${what} failed (errno ${errno()}).`);
}

/**
 * Marks every descriptor from 3 up close-on-exec, so the next child starts with nothing the
 * supervisor holds: node-pty opens each agent's pty master without it, and a pipe inherited
 * from the shell that started the supervisor would otherwise reach every agent.
 */
export function closeOnExecAll(): void {
  const c = libc();
  if (c.close_range && c.close_range(3, 0xffffffff, CLOSE_RANGE_CLOEXEC) === 0) return;
  // Kernels before 5.11: walk the descriptor table (EBADF on the unused ones is cheap).
  for (let fd = 3; fd < 65536; fd++) {
    const flags = c.fcntl(fd, F_GETFD, 0);
    if (flags >= 0 && (flags & FD_CLOEXEC) === 0) c.fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

/**
 * A lock every isolate of this process shares (the isolates `deno test --parallel` runs, an
 * embedder's Workers): stdio's lock on libc's `stdin` stream. Nothing in a Deno process uses
 * C stdio (Deno reads its stdin through Rust), no other process can take it, and it dies with
 * the process. It is recursive for the thread that holds it, and each isolate runs on its own
 * thread. True when taken; false while another isolate holds it.
 */
export function tryLockProcess(): boolean {
  const c = libc();
  const stream = new Deno.UnsafePointerView(c.stdin as NonNullable<Deno.PointerValue>).getPointer();
  return c.ftrylockfile(stream) === 0;
}

/** Releases one hold of `tryLockProcess` (from the isolate that took it). */
export function unlockProcess(): void {
  const c = libc();
  const stream = new Deno.UnsafePointerView(c.stdin as NonNullable<Deno.PointerValue>).getPointer();
  c.funlockfile(stream);
}

/** Sets or clears close-on-exec on one descriptor. */
export function setCloseOnExec(fd: number, on: boolean): void {
  const c = libc();
  const flags = c.fcntl(fd, F_GETFD, 0);
  if (flags < 0) fail(`fcntl(${fd}, F_GETFD)`);
  if (c.fcntl(fd, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC) < 0) {
    fail(`fcntl(${fd}, F_SETFD)`);
  }
}

/** Makes reads of `fd` return at once when nothing is there. */
export function setNonBlocking(fd: number): void {
  const c = libc();
  const flags = c.fcntl(fd, F_GETFL, 0);
  if (flags < 0 || c.fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) fail(`fcntl(${fd}, F_SETFL)`);
}

/** A pipe; both ends close-on-exec, so a caller clears the flag on the one a child inherits. */
export function pipe(): { read: number; write: number } {
  const fds = new Int32Array(2);
  if (libc().pipe2(new Uint8Array(fds.buffer), O_CLOEXEC) !== 0) fail("pipe2");
  return { read: fds[0], write: fds[1] };
}

/** Closes a raw descriptor; closing one twice is the caller's bug, so errors are ignored. */
export function closeFd(fd: number): void {
  if (fd >= 0) libc().close(fd);
}

/** Writes all of `data` to a blocking descriptor. */
export function writeAll(fd: number, data: Uint8Array): void {
  const c = libc();
  let at = 0;
  while (at < data.length) {
    const chunk = data.slice(at);
    const n = Number(c.write(fd, chunk, BigInt(chunk.length)));
    if (n < 0) {
      if (errno() === EINTR) continue;
      fail(`write(${fd})`);
    }
    at += n;
  }
}

/**
 * One non-blocking read: the bytes there, an empty array at end of file, or undefined when
 * nothing is there yet. Only a descriptor that is not open fails it: errno is read by a second
 * call, after which the runtime may have clobbered it (a full-suite run saw `read` fail with
 * ENOENT, which `read` never sets), so any other failure reads as "not yet", and the caller's
 * deadline bounds the waiting.
 */
export function readNow(fd: number, max = 4096): Uint8Array | undefined {
  const buf = new Uint8Array(max);
  const n = Number(libc().read(fd, buf, BigInt(max)));
  if (n < 0) {
    if (errno() === EBADF) fail(`read(${fd})`);
    return undefined;
  }
  return buf.subarray(0, n);
}

/** Reads a whole small file through libc (for `/proc` and cgroup files); undefined if absent. */
export function readSmallFile(path: string): string | undefined {
  const c = libc();
  const fd = c.open(cstr(path), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  try {
    const parts: Uint8Array[] = [];
    const buf = new Uint8Array(65536);
    while (true) {
      const n = Number(c.read(fd, buf, BigInt(buf.length)));
      if (n < 0) {
        if (errno() === EINTR) continue;
        return undefined;
      }
      if (n === 0) break;
      parts.push(buf.slice(0, n));
    }
    const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return new TextDecoder().decode(out);
  } finally {
    c.close(fd);
  }
}

const SYS_OPENAT2 = 437; // one number on every architecture
const AT_FDCWD = -100;
const RESOLVE_NO_SYMLINKS = 0x04;

/**
 * `open(2)` of `path` following no symlink in any of its components (`openat2` with
 * `RESOLVE_NO_SYMLINKS`, Linux 5.6; before that, none in the last one only). -1 when refused.
 */
function openNoLinks(path: string, flags: number): number {
  const c = libc();
  const how = new Uint8Array(24); // struct open_how: flags, mode, resolve
  const v = new DataView(how.buffer);
  v.setBigUint64(0, BigInt(flags), true);
  v.setBigUint64(16, BigInt(RESOLVE_NO_SYMLINKS), true);
  const fd = Number(
    c.syscall4(BigInt(SYS_OPENAT2), BigInt(AT_FDCWD), cstr(path), how, BigInt(how.length)),
  );
  if (fd >= 0) return fd;
  return errno() === ENOSYS ? c.open(cstr(path), flags | O_NOFOLLOW, 0) : -1;
}

/**
 * Reads at most `max` bytes of `path` without following a symlink in any of its components (a
 * directory above it swapped for a link by whoever may write there included: red team 43) and
 * without blocking (a FIFO opens and reads as empty instead of waiting for a writer).
 * Undefined when it cannot be opened; `over` when it holds more than `max` bytes; `link` when
 * a component is a symlink.
 */
export function readNoFollow(path: string, max: number): Uint8Array | "over" | "link" | undefined {
  const c = libc();
  const fd = openNoLinks(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno() === ELOOP ? "link" : undefined;
  try {
    const out = new Uint8Array(max + 1);
    let at = 0;
    while (at < out.length) {
      const n = Number(c.read(fd, out.subarray(at), BigInt(out.length - at)));
      if (n < 0) {
        if (errno() === EINTR) continue;
        return undefined;
      }
      if (n === 0) break;
      at += n;
    }
    return at > max ? "over" : out.slice(0, at);
  } finally {
    c.close(fd);
  }
}

/**
 * Writes `text` to an existing file in one `write(2)` (cgroup control files take one value per
 * write); throws `libc_failed` with the errno when the kernel refuses it.
 */
export function writeControlFile(path: string, text: string): void {
  const c = libc();
  const fd = c.open(cstr(path), O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) fail(`open(${path})`);
  try {
    const data = new TextEncoder().encode(text);
    if (Number(c.write(fd, data, BigInt(data.length))) !== data.length) fail(`write(${path})`);
  } finally {
    c.close(fd);
  }
}

const O_DIRECTORY = Deno.build.arch === "aarch64" ? 0o40000 : 0o200000;
const SYS_BPF = Deno.build.arch === "aarch64" ? 217 : 321;

/**
 * One `bpf(2)` call with `attr` (a `union bpf_attr`, zero-padded); returns its result (a new
 * descriptor for a load), or throws `libc_failed` with the errno.
 */
export function bpf(cmd: number, attr: Uint8Array<ArrayBuffer>, what: string): number {
  const r = Number(libc().syscall(BigInt(SYS_BPF), BigInt(cmd), attr, BigInt(attr.length)));
  if (r < 0) fail(what);
  return r;
}

/**
 * This kernel's Landlock ABI version (`landlock_create_ruleset(NULL, 0, VERSION)`, one syscall
 * number on every architecture), or 0 when Landlock is absent or disabled.
 */
export function landlockAbiVersion(): number {
  const r = Number(libc().syscall(444n, 0n, null, 1n));
  return r > 0 ? r : 0;
}

/** Opens a directory for its descriptor (a cgroup, to attach a program to); throws. */
export function openDir(path: string): number {
  const fd = libc().open(cstr(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) fail(`open(${path})`);
  return fd;
}

/** Creates one directory through libc (cgroup trees); true if it exists afterwards (EEXIST). */
export function makeDir(path: string, mode = 0o755): boolean {
  return libc().mkdir(cstr(path), mode) === 0 || errno() === EEXIST;
}

/** Removes an empty directory through libc (cgroup trees); false when the kernel refuses. */
export function removeDir(path: string): boolean {
  return libc().rmdir(cstr(path)) === 0 || errno() === ENOENT;
}

const MS_NOSUID = 2n;
const MS_NOEXEC = 8n;
const MNT_DETACH = 2;

/**
 * Mounts a fresh devpts instance at `target` that hands out at most `max` ptys (needs root).
 * Every instance counts against the host-wide `kernel.pty.max`: an agent's own, capped one
 * keeps it from taking the pool the host's and other agents' terminals come from.
 */
export function mountDevpts(target: string, max: number): void {
  const data = `newinstance,ptmxmode=0666,mode=620,max=${max}`;
  if (
    libc().mount(
      cstr("devpts"),
      cstr(target),
      cstr("devpts"),
      MS_NOSUID | MS_NOEXEC,
      cstr(data),
    ) !==
      0
  ) {
    fail(`mount devpts at ${target}`);
  }
}

/** Detaches whatever is mounted at `target`; false when nothing was (or the kernel refused). */
export function unmount(target: string): boolean {
  return libc().umount2(cstr(target), MNT_DETACH) === 0;
}

/**
 * Takes an exclusive advisory lock on `path` (created 0600) without waiting. Returns the held
 * descriptor (close it to release; the kernel releases it when this process dies), or
 * undefined when another holder has it.
 */
export function tryLockFile(path: string): number | undefined {
  const c = libc();
  const fd = c.open(cstr(path), O_RDWR | O_CREAT | O_CLOEXEC, 0o600);
  if (fd < 0) fail(`open(${path})`);
  if (c.flock(fd, LOCK_EX | LOCK_NB) === 0) return fd;
  c.close(fd);
  return undefined;
}

/**
 * Sends a signal by number-free name; false when the process is gone (ESRCH). `Deno.kill`
 * needs an unscoped `--allow-run`, which the supervisor's row does not grant.
 */
export function signalProcess(pid: number, signal: "SIGKILL" | "SIGTERM" | "SIGCONT"): boolean {
  const num = { SIGKILL: 9, SIGTERM: 15, SIGCONT: 18 }[signal];
  if (!Number.isInteger(pid) || pid <= 1) return false;
  return libc().kill(pid, num) === 0;
}

/**
 * Signals the process group `pgid` leads (a pty child is a session and group leader): the
 * children a deno-only runner started go with it. False when there is no such group.
 */
export function signalGroup(pgid: number, signal: "SIGKILL" | "SIGTERM"): boolean {
  const num = { SIGKILL: 9, SIGTERM: 15 }[signal];
  if (!Number.isInteger(pgid) || pgid <= 1) return false;
  return libc().kill(-pgid, num) === 0;
}
