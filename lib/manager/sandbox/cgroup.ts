/**
 * One cgroup per agent, where the supervisor may make them: cgroup v2 when its own group is
 * delegated with the memory and pids controllers, else the v1 memory, pids and cpu hierarchies
 * when it can create groups in them (as root on a v1 or hybrid host). Memory then bounds the
 * whole agent (every process, its tmpfs pages included) and the kernel's OOM killer stays
 * inside the group; without a cgroup the limits fall back to rlimits alone, and `ps` says so.
 *
 * Every file here lives under `/sys/fs/cgroup`, which Deno's file API refuses without
 * `--allow-all`, so reads and writes go through libc.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { capIpSockets, denyIpBinds } from "./bind_guard.ts";
import { type ConnectPolicy, guardConnects, releaseConnectGuard } from "./connect_guard.ts";
import { makeDir, readSmallFile, removeDir, writeControlFile } from "./libc.ts";
import type { AgentLimits } from "./limits.ts";

/** Where agent groups are made, and how. */
export interface CgroupHost {
  readonly version: 1 | 2;
  /** v2: the one parent dir; v1: the parent dir per controller. */
  readonly parents: Readonly<Record<string, string>>;
  /**
   * Where a group that carries the bind guard is made: the v2 parent, or on a hybrid host the
   * supervisor's group in the v2 hierarchy beside the v1 ones (no controllers needed there).
   */
  readonly guardParent?: string;
}

/** One agent's group(s), ready to receive its sandbox's first process. */
export interface AgentCgroup {
  readonly version: 1 | 2;
  /** Each group dir (one for v2; memory, pids and cpu for v1). */
  readonly dirs: readonly string[];
}

/** How a test points the discovery at a fake tree; defaults read the live system. */
export interface CgroupProbeInput {
  /** `/proc/self/cgroup`. */
  readonly selfCgroup?: string;
  /** `/proc/self/mountinfo`. */
  readonly mountinfo?: string;
  /** The supervisor's pid (v2 moves it into a leaf before enabling controllers). */
  readonly pid?: number;
}

interface Mount {
  readonly point: string;
  readonly root: string;
  readonly type: string;
  readonly options: string[];
}

function mounts(mountinfo: string): Mount[] {
  const out: Mount[] = [];
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!right) continue;
    const f = left.split(" ");
    const r = right.split(" ");
    out.push({ root: f[3], point: f[4], type: r[0], options: (r[2] ?? "").split(",") });
  }
  return out;
}

function under(m: Mount, path: string): string | undefined {
  if (m.root === "/") return `${m.point}${path === "/" ? "" : path}`;
  if (path === m.root || path.startsWith(`${m.root}/`)) {
    return `${m.point}${path.slice(m.root.length)}`;
  }
  return undefined;
}

const V1_CONTROLLERS = ["memory", "pids", "cpu"] as const;

/**
 * Finds where this process may make agent groups, or undefined (no cgroup support here, or no
 * right to use it). For v2 it moves the supervisor into `<own>/supervisor` and enables the
 * memory, pids and cpu controllers for its children, the layout a systemd unit with
 * `Delegate=yes` expects.
 */
export function probeCgroups(input: CgroupProbeInput = {}): CgroupHost | undefined {
  const self = input.selfCgroup ?? readSmallFile("/proc/self/cgroup");
  const info = input.mountinfo ?? readSmallFile("/proc/self/mountinfo");
  if (!self || !info) return undefined;
  const ms = mounts(info);
  const lines = self.trim().split("\n").map((l) => {
    const [, , ctl, path] = /^(\d+):([^:]*):(.*)$/.exec(l) ?? [];
    return { ctl: ctl ?? "", path: path ?? "" };
  });
  return v2Host(lines, ms, input.pid ?? Deno.pid) ?? v1Host(lines, ms);
}

function v2Host(
  lines: { ctl: string; path: string }[],
  ms: Mount[],
  pid: number,
): CgroupHost | undefined {
  const line = lines.find((l) => l.ctl === "");
  const m = ms.find((x) => x.type === "cgroup2");
  if (!line || !m) return undefined;
  const own = under(m, line.path);
  if (!own) return undefined;
  const available = (readSmallFile(`${own}/cgroup.controllers`) ?? "").split(/\s+/);
  if (!available.includes("memory") || !available.includes("pids")) return undefined;
  const enabled = (readSmallFile(`${own}/cgroup.subtree_control`) ?? "").split(/\s+/);
  try {
    if (!enabled.includes("memory") || !enabled.includes("pids")) {
      // No internal processes: the supervisor leaves its group for a leaf before the group may
      // hand controllers to its children.
      if (!makeDir(`${own}/supervisor`)) return undefined;
      writeControlFile(`${own}/supervisor/cgroup.procs`, String(pid));
      const want = ["memory", "pids", ...(available.includes("cpu") ? ["cpu"] : [])];
      writeControlFile(`${own}/cgroup.subtree_control`, want.map((c) => `+${c}`).join(" "));
    }
  } catch {
    return undefined;
  }
  return { version: 2, parents: { unified: own }, guardParent: own };
}

function v1Host(lines: { ctl: string; path: string }[], ms: Mount[]): CgroupHost | undefined {
  const parents: Record<string, string> = {};
  for (const ctl of V1_CONTROLLERS) {
    const line = lines.find((l) => l.ctl.split(",").includes(ctl));
    const m = ms.find((x) => x.type === "cgroup" && x.options.includes(ctl));
    const dir = line && m ? under(m, line.path) : undefined;
    if (!dir) {
      if (ctl === "cpu") continue;
      return undefined;
    }
    parents[ctl] = dir;
  }
  // Writable here means the kernel lets this process make a group (root, or a delegated tree).
  if (!mayMake(parents.memory)) return undefined;
  // A hybrid host's v2 hierarchy carries no controllers, but cgroup programs attach there.
  const line = lines.find((l) => l.ctl === "");
  const m = ms.find((x) => x.type === "cgroup2");
  const unified = line && m ? under(m, line.path) : undefined;
  return { version: 1, parents, ...(unified && mayMake(unified) ? { guardParent: unified } : {}) };
}

function mayMake(parent: string): boolean {
  const probe = `${parent}/cotal-probe-${crypto.randomUUID().slice(0, 8)}`;
  if (!makeDir(probe)) return false;
  removeDir(probe);
  return true;
}

/** The most TCP buffer memory one agent's sockets may hold under cgroup v1. */
export const TCP_BUFFER_CAP = 64 * 1024 * 1024;

/** A group name: `cotal-<name>-<unique>` (a cgroup name may not contain `/`). */
export function cgroupName(agent: string, unique: string): string {
  return `cotal-${agent.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64)}-${unique}`;
}

/**
 * Makes the agent's group(s) and writes its limits; with `hostNet`, the group its processes
 * join also refuses every IP bind, counts its IP sockets (`bind_guard.ts`) and allows only the
 * listed loopback ports and a bounded rate of connections (`connect_guard.ts`). Throws `cgroup_failed` (and
 * removes what it made) when the kernel refuses a step.
 */
export function createAgentCgroup(
  host: CgroupHost,
  name: string,
  limits: AgentLimits,
  opts: { hostNet?: ConnectPolicy } = {},
): AgentCgroup {
  const made: string[] = [];
  try {
    if (host.version === 2) {
      const dir = `${host.parents.unified}/${name}`;
      if (!makeDir(dir)) throw new Error(`mkdir ${dir}`);
      made.push(dir);
      writeControlFile(`${dir}/memory.max`, String(limits.memory));
      // Swap would let a group sit far past its memory line; the tmpfs pages count as memory.
      tryWrite(`${dir}/memory.swap.max`, "0");
      writeControlFile(`${dir}/pids.max`, String(limits.processes));
      tryWrite(`${dir}/cpu.weight`, String(Math.max(1, limits.cpuShare)));
      if (opts.hostNet) guardHostNet(dir, opts.hostNet);
      return { version: 2, dirs: made };
    }
    if (opts.hostNet) {
      if (!host.guardParent) throw new Error("no cgroup v2 hierarchy to attach the bind guard to");
      const dir = `${host.guardParent}/${name}`;
      if (!makeDir(dir)) throw new Error(`mkdir ${dir}`);
      made.push(dir);
      guardHostNet(dir, opts.hostNet);
    }
    for (const [ctl, parent] of Object.entries(host.parents)) {
      const dir = `${parent}/${name}`;
      if (!makeDir(dir)) throw new Error(`mkdir ${dir}`);
      made.push(dir);
      if (ctl === "memory") {
        writeControlFile(`${dir}/memory.limit_in_bytes`, String(limits.memory));
        tryWrite(`${dir}/memory.memsw.limit_in_bytes`, String(limits.memory));
        // v1 charges TCP buffers to a group only with this set (v2 always does): without it an
        // agent's loopback sockets drain the host-wide tcp_mem and the host's own TCP fails.
        tryWrite(
          `${dir}/memory.kmem.tcp.limit_in_bytes`,
          String(Math.min(limits.memory, TCP_BUFFER_CAP)),
        );
      } else if (ctl === "pids") {
        writeControlFile(`${dir}/pids.max`, String(limits.processes));
      } else if (ctl === "cpu") {
        tryWrite(`${dir}/cpu.shares`, String(Math.max(2, Math.round(limits.cpuShare * 10.24))));
      }
    }
    return { version: 1, dirs: made };
  } catch (err) {
    for (const dir of made.reverse()) {
      releaseConnectGuard(dir);
      removeDir(dir);
    }
    throw new CotalError(
      "cgroup_failed",
      `Could not set up the agent's cgroup (${(err as Error).message}).`,
      { cause: err },
    );
  }
}

/**
 * The host-network guard: no IP bind and a bounded count of IP sockets (`bind_guard.ts`), the
 * loopback closed but for `policy`'s ports and a bounded rate of connections (`connect_guard.ts`).
 */
function guardHostNet(dir: string, policy: ConnectPolicy): void {
  denyIpBinds(dir);
  capIpSockets(dir);
  guardConnects(dir, policy);
}

function tryWrite(path: string, text: string): void {
  try {
    writeControlFile(path, text);
  } catch {
    // An optional knob this kernel does not have.
  }
}

/** Moves `pid` (the sandbox's first process, before it forks anything) into the group(s). */
export function joinAgentCgroup(cg: AgentCgroup, pid: number): void {
  for (const dir of cg.dirs) writeControlFile(`${dir}/cgroup.procs`, String(pid));
}

/** The bytes the group has in use now (memory), or undefined. */
export function cgroupMemoryUsage(cg: AgentCgroup): number | undefined {
  const file = cg.version === 2 ? "memory.current" : "memory.usage_in_bytes";
  for (const dir of cg.dirs) {
    const text = readSmallFile(`${dir}/${file}`);
    if (text !== undefined) return Number(text.trim());
  }
  return undefined;
}

/**
 * Removes the group(s) once their processes are gone; retried briefly, since the kernel
 * frees a group a moment after its last process is reaped. False when one is still busy.
 */
export async function removeAgentCgroup(cg: AgentCgroup, deadlineMs = 2_000): Promise<boolean> {
  const until = Date.now() + deadlineMs;
  for (const dir of cg.dirs) releaseConnectGuard(dir);
  let left = [...cg.dirs];
  while (left.length) {
    left = left.filter((dir) => !removeDir(dir));
    if (!left.length || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return left.length === 0;
}
