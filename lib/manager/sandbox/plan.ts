/**
 * The sandbox one agent runner starts in, as bubblewrap arguments built from an allowlist: an
 * empty root, then read-only binds of exactly what the runner and the agent's declared program
 * need (system dirs, a short list of harmless `/etc` files plus a generated passwd, group and
 * hosts, the Deno executable and module cache wherever they live, the runner's code), the
 * agent's launch dir read-only, a private size-capped home, `/tmp` and `/dev/shm`, and an
 * operator-declared workdir read-write. Nothing else of the host exists inside: not the state
 * root, not other agents, not the operator's home, not other Cotal roots.
 *
 * Around it: new PID, IPC, UTS, cgroup and (by default) network namespaces, no capabilities,
 * the seccomp filter, death with the supervisor, and an exec chain that applies the rlimits and
 * then, when the supervisor is root, drops to the agent's own unprivileged uid. A supervisor
 * that is not root gets the same through an unprivileged user namespace in which the agent
 * cannot make another.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { scopeChain } from "./landlock.ts";
import { type AgentLimits, limitChain } from "./limits.ts";

/** Where the agent's launch dir (read-only) appears inside. */
export const LAUNCH_DIR_INSIDE = "/run/cotal/launch";
/** The broker relay's socket inside. */
export const BROKER_SOCKET_INSIDE = "/run/cotal/broker.sock";
/** The control channel's socket inside. */
export const CONTROL_SOCKET_INSIDE = "/run/cotal/control.sock";
/** The spawn channel's socket inside (an agent that may spawn personas). */
export const SPAWN_SOCKET_INSIDE = "/run/cotal/spawn.sock";
/** The agent's private home inside. */
export const HOME_INSIDE = "/home/agent";
/** The PATH an agent gets: the system's, which is all that is mounted. */
export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** The switch to the agent's uid (util-linux `setpriv`), when the supervisor is root. */
export const SETPRIV = "/usr/bin/setpriv";

/** Top-level system dirs bound read-only when present (symlinks recreated as symlinks). */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * The host `/etc` entries an agent sees, read-only: the dynamic linker, alternatives, time zone,
 * name-service switch, TLS roots and a few shell and tool defaults. No shadow, no host keys, no
 * `/etc/ssl/private`, no npm or pip config (they can hold tokens), no hosts or resolv.conf
 * (generated, or the host's only with `--net host`).
 */
export const ETC_ALLOWLIST: readonly string[] = Object.freeze([
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "alternatives",
  "localtime",
  "timezone",
  "nsswitch.conf",
  "os-release",
  "debian_version",
  "ssl/certs",
  "ssl/openssl.cnf",
  "ca-certificates",
  "mime.types",
  "bash.bashrc",
  "profile",
  "inputrc",
  "terminfo",
  "services",
  "protocols",
  "gai.conf",
  "host.conf",
  "locale.alias",
  "magic",
  "magic.mime",
  "perl",
]);

/** Network mode: `relay` (own namespace, the broker through the supervisor) or `host`. */
export type NetMode = "relay" | "host";

/** Everything that differs between two agents' sandboxes. */
export interface SandboxPlan {
  /** The agent's launch dir on the host (supervisor-owned); read-only at LAUNCH_DIR_INSIDE. */
  readonly launchDir: string;
  /** Generated passwd, group, hosts and hostname files, bound into `/etc`. */
  readonly etcFiles: Readonly<Record<string, string>>;
  /** The control channel's socket on the host. */
  readonly controlSocket: string;
  /** The broker relay's socket on the host (`relay` mode). */
  readonly brokerSocket?: string;
  /** The spawn channel's socket on the host (an agent that may spawn). */
  readonly spawnSocket?: string;
  readonly net: NetMode;
  /** Bound read-write at the same path (the operator's workdir). */
  readonly workdir?: string;
  /** Bound read-only at the same path: the agent's program and what the operator exposes. */
  readonly expose: readonly string[];
  /** Bound read-only at the same path: the runner (deno, its module cache, the code). */
  readonly code: readonly string[];
  /**
   * The runner's `DENO_DIR`: a small private tmpfs under the read-only parts of `code`, where
   * Deno keeps its own SQLite caches. Without it Deno cannot open them and says so on the
   * agent's terminal at every start.
   */
  readonly denoCache?: string;
  readonly limits: AgentLimits;
  /** Whether a cgroup carries memory (else RLIMIT_DATA bounds each process). */
  readonly cgroupMemory: boolean;
  /** The agent's ids; `switchUser` when the supervisor is root and drops to them. */
  readonly uid: number;
  readonly gid: number;
  readonly switchUser: boolean;
  /** The whole environment inside. */
  readonly env: Readonly<Record<string, string>>;
  /** Its own capped devpts instance on the host, bound over `/dev/pts`. */
  readonly ptsDir?: string;
  /** Inherited descriptors bwrap reads: the seccomp program, its info and block pipes. */
  readonly seccompFd?: number;
  /**
   * Take the Landlock scope first (see `landlock.ts`): no abstract unix socket or signal
   * reaches outside the sandbox.
   */
  readonly landlockScope?: boolean;
  readonly infoFd?: number;
  readonly blockFd?: number;
  /** Detach from the controlling terminal (not under a pty, whose session is the agent's). */
  readonly newSession?: boolean;
}

/** Room for Deno's dependency-analysis and code caches of the runner (a few MiB in practice). */
const DENO_CACHE_BYTES = 64 * 1024 * 1024;

/** A tmpfs at `path` must not cover a mount made before it (`/`, the system dirs, /tmp, home). */
function ownsNoMount(path: string, made: ReadonlySet<string>): boolean {
  for (const m of made) if (isInside(m, path)) return false;
  return !SYSTEM_DIRS.some((d) => isInside(path, d) || isInside(d, path));
}

/** Whether `path` is `dir` or below it (plain paths; `/` holds everything). */
export function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir === "/" ? "/" : `${dir}/`);
}

function ancestors(path: string): string[] {
  const parts = path.split("/").filter(Boolean);
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) out.push(`/${parts.slice(0, i).join("/")}`);
  return out;
}

function lstat(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The bwrap arguments (without the binary) up to and including `--`, then the exec chain; the
 * runner's own argv follows. Paths must be absolute and free of `..`.
 */
export function bwrapArgs(plan: SandboxPlan): string[] {
  for (
    const p of [
      plan.launchDir,
      plan.controlSocket,
      plan.workdir,
      plan.brokerSocket,
      plan.spawnSocket,
      ...plan.expose,
      ...plan.code,
      plan.denoCache,
    ]
  ) {
    if (p !== undefined && (!p.startsWith("/") || p.split("/").includes(".."))) {
      throw new CotalError(
        "sandbox_bad_path",
        `The sandbox path ${p} must be absolute, without '..'.`,
      );
    }
  }
  const a: string[] = [];
  const made = new Set<string>(["/"]);
  const mkdirs = (path: string) => {
    for (const d of ancestors(path)) {
      if (made.has(d)) continue;
      made.add(d);
      // Explicit 0755: bwrap would otherwise copy the host dir's mode (a 0700 home hides a
      // Deno install below it from the agent's uid).
      a.push("--perms", "0755", "--dir", d);
    }
  };
  const bind = (flag: string, src: string, dest = src) => {
    mkdirs(dest);
    a.push(flag, src, dest);
    made.add(dest);
  };
  for (const dir of SYSTEM_DIRS) {
    const st = lstat(dir);
    if (!st) continue;
    if (st.isSymlink) a.push("--symlink", Deno.readLinkSync(dir), dir);
    else bind("--ro-bind", dir);
    made.add(dir);
  }
  for (const name of ETC_ALLOWLIST) {
    const path = `/etc/${name}`;
    if (lstat(path)) bind("--ro-bind", path);
  }
  for (const [name, hostFile] of Object.entries(plan.etcFiles)) {
    bind("--ro-bind", hostFile, `/etc/${name}`);
  }
  if (plan.net === "host") {
    for (const name of ["resolv.conf", "hosts"]) {
      if (!plan.etcFiles[name] && lstat(`/etc/${name}`)) bind("--ro-bind", `/etc/${name}`);
    }
  }
  a.push("--proc", "/proc", "--dev", "/dev");
  made.add("/proc").add("/dev");
  // Its own devpts instance with a `max`, instead of bwrap's uncapped one.
  if (plan.ptsDir) a.push("--dev-bind", plan.ptsDir, "/dev/pts");
  const tmpfs = (dest: string, bytes: number, perms: string) => {
    mkdirs(dest);
    a.push("--perms", perms, "--size", String(bytes), "--tmpfs", dest);
    made.add(dest);
  };
  tmpfs("/dev/shm", Math.min(plan.limits.tmp, 64 * 1024 * 1024), "1777");
  tmpfs("/tmp", plan.limits.tmp, "1777");
  // Every process inside runs as the agent's uid, and bwrap cannot chown a tmpfs: a sticky,
  // world-writable home is the agent's alone because nothing else exists in its sandbox.
  tmpfs(HOME_INSIDE, plan.limits.home, "1777");
  if (plan.denoCache && ownsNoMount(plan.denoCache, made)) {
    tmpfs(plan.denoCache, Math.min(plan.limits.tmp, DENO_CACHE_BYTES), "1777");
  }
  if (plan.workdir) bind("--bind", plan.workdir);
  for (const p of plan.expose) bind("--ro-bind", p);
  for (const p of plan.code) bind("--ro-bind", p);
  bind("--ro-bind", plan.launchDir, LAUNCH_DIR_INSIDE);
  bind("--bind", plan.controlSocket, CONTROL_SOCKET_INSIDE);
  if (plan.spawnSocket) bind("--bind", plan.spawnSocket, SPAWN_SOCKET_INSIDE);
  if (plan.net === "relay") {
    if (!plan.brokerSocket) {
      throw new CotalError("sandbox_bad_path", "The relay network mode needs the broker socket.");
    }
    bind("--bind", plan.brokerSocket, BROKER_SOCKET_INSIDE);
  }
  a.push("--remount-ro", "/");
  a.push("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try");
  a.push("--hostname", "cotal-agent");
  if (plan.net === "relay") a.push("--unshare-net");
  if (plan.switchUser) {
    // As root: no user namespace (the uid switch below is the boundary); bwrap keeps only what
    // setpriv needs to drop to the agent's uid and empty the bounding set, then nothing.
    a.push("--cap-drop", "ALL");
    for (const cap of ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]) a.push("--cap-add", cap);
  } else {
    a.push("--unshare-user", "--disable-userns", "--cap-drop", "ALL");
  }
  a.push("--die-with-parent");
  if (plan.newSession) a.push("--new-session");
  if (plan.seccompFd !== undefined) a.push("--seccomp", String(plan.seccompFd));
  if (plan.infoFd !== undefined) a.push("--info-fd", String(plan.infoFd));
  if (plan.blockFd !== undefined) a.push("--block-fd", String(plan.blockFd));
  a.push("--clearenv");
  for (const [k, v] of Object.entries(plan.env)) a.push("--setenv", k, v);
  a.push("--chdir", HOME_INSIDE, "--");
  if (plan.landlockScope) a.push(...scopeChain());
  a.push(...limitChain(plan.limits, { perProcessMemory: !plan.cgroupMemory }));
  if (plan.switchUser) {
    a.push(
      SETPRIV,
      `--reuid=${plan.uid}`,
      `--regid=${plan.gid}`,
      "--clear-groups",
      "--bounding-set=-all",
      "--inh-caps=-all",
      "--ambient-caps=-all",
      "--no-new-privs",
      "--",
    );
  }
  return a;
}

/** The passwd, group, hosts and hostname an agent sees (written by the supervisor). */
export function etcContents(ids: { uid: number; gid: number }): Record<string, string> {
  return {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\n` +
      `agent:x:${ids.uid}:${ids.gid}:Cotal agent:${HOME_INSIDE}:/bin/sh\n` +
      `nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\nagent:x:${ids.gid}:\nnogroup:x:65534:\n`,
    hosts: "127.0.0.1\tlocalhost cotal-agent\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    hostname: "cotal-agent\n",
  };
}

/**
 * Refuses a path the operator asks to expose or use as a workdir when it holds, or sits
 * inside, anything an agent must not see (a Cotal state dir, the machine home, another
 * agent), or is a system root whose exposure would undo the allowlist.
 */
export function assertExposable(
  path: string,
  forbidden: readonly string[],
  what: "workdir" | "exposed path",
): void {
  const p = path.replace(/\/+$/, "") || "/";
  const roots = [
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var",
    "/root",
    "/home",
    "/boot",
    "/tmp",
  ];
  if (!p.startsWith("/") || p.split("/").includes("..") || roots.includes(p)) {
    throw new CotalError(
      "sandbox_path_refused",
      `The ${what} ${p} is not allowed: give an absolute directory below the system roots (for example a project dir), not ${p}.`,
    );
  }
  for (const f of forbidden) {
    const dir = f.replace(/\/+$/, "") || "/";
    if (isInside(dir, p) || isInside(p, dir)) {
      throw new CotalError(
        "sandbox_path_refused",
        `The ${what} ${p} overlaps ${dir}, which agents must never see; pick a dir outside Cotal's state.`,
      );
    }
  }
}
