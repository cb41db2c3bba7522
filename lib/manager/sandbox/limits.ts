/**
 * Per-agent resource limits: frozen defaults and ceilings, the operator's per-space and
 * per-spawn choices (validated against the ceilings, never above them), and how each is
 * enforced: rlimits and an OOM score on every agent, a cgroup where the supervisor may make one.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";

/** What one agent may use. Sizes are bytes. */
export interface AgentLimits {
  /** Processes and threads of the agent's uid (RLIMIT_NPROC; `pids.max` in a cgroup). */
  readonly processes: number;
  /** Memory of the whole agent in a cgroup; without one, of each process (RLIMIT_DATA). */
  readonly memory: number;
  /** CPU weight as a percentage of an ordinary process's (cgroup weight, and the nice level). */
  readonly cpuShare: number;
  /** The largest file it may write (RLIMIT_FSIZE). */
  readonly fileSize: number;
  /** Its private home directory (a size-capped tmpfs). */
  readonly home: number;
  /** Its private `/tmp` (a size-capped tmpfs). */
  readonly tmp: number;
  /** Open descriptors per process (RLIMIT_NOFILE). */
  readonly openFiles: number;
  /** Terminals it may open (its own devpts instance's `max`; a root supervisor's agents). */
  readonly ptys: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;

/** What an agent gets unless the operator says otherwise. */
export const DEFAULT_AGENT_LIMITS: AgentLimits = Object.freeze({
  processes: 256,
  memory: 1 * GIB,
  cpuShare: 50,
  fileSize: 256 * MIB,
  home: 256 * MIB,
  tmp: 64 * MIB,
  openFiles: 4096,
  ptys: 16,
});

/**
 * The floor and ceiling of each limit. Frozen: an operator's choice outside them is refused,
 * and nothing an agent sends reaches them at all. The memory floor is what one Deno runner
 * needs to start with RLIMIT_DATA set (V8 reserves its heap up front; 512 MiB is refused).
 */
export const AGENT_LIMIT_BOUNDS: Readonly<Record<keyof AgentLimits, readonly [number, number]>> =
  Object.freeze({
    processes: Object.freeze([16, 4096] as const),
    memory: Object.freeze([1 * GIB, 64 * GIB] as const),
    cpuShare: Object.freeze([1, 100] as const),
    fileSize: Object.freeze([1 * MIB, 64 * GIB] as const),
    home: Object.freeze([1 * MIB, 16 * GIB] as const),
    tmp: Object.freeze([1 * MIB, 16 * GIB] as const),
    openFiles: Object.freeze([256, 65536] as const),
    ptys: Object.freeze([1, 256] as const),
  });

/** The limit names, as the CLI and the rail spell them. */
export const LIMIT_NAMES: readonly (keyof AgentLimits)[] = Object.freeze(
  Object.keys(DEFAULT_AGENT_LIMITS) as (keyof AgentLimits)[],
);

const SIZE_LIMITS = new Set<keyof AgentLimits>(["memory", "fileSize", "home", "tmp"]);

function human(name: keyof AgentLimits, n: number): string {
  if (!SIZE_LIMITS.has(name)) return String(n);
  if (n % GIB === 0) return `${n / GIB}G`;
  if (n % MIB === 0) return `${n / MIB}M`;
  return `${n}`;
}

/** Each limit with its bounds (`memory 1G-64G, ...`), for help texts. */
export function limitBoundsText(): string {
  return LIMIT_NAMES.map((n) => {
    const [lo, hi] = AGENT_LIMIT_BOUNDS[n];
    return `${n} ${human(n, lo)}-${human(n, hi)}`;
  }).join(", ");
}

/** Parses `512M`, `2G`, `1048576` (bytes) or a plain count. */
function parseAmount(name: keyof AgentLimits, v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v !== "string") return NaN;
  const m = /^(\d{1,12})([KMG]?)$/i.exec(v.trim());
  if (!m) return NaN;
  if (m[2] && !SIZE_LIMITS.has(name)) return NaN;
  const unit = { "": 1, K: KIB, M: MIB, G: GIB }[m[2].toUpperCase() as "" | "K" | "M" | "G"];
  return Number(m[1]) * unit;
}

/**
 * Validates a partial set of limits (from the rail or a flag) against the frozen bounds:
 * unknown names, non-integers and values outside a bound are refused with `limits_invalid`.
 */
export function parseLimits(raw: unknown): Partial<AgentLimits> {
  if (raw === undefined) return {};
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new CotalError("limits_invalid", "limits must be an object of name: value.");
  }
  const out: Partial<Record<keyof AgentLimits, number>> = {};
  for (const [key, v] of Object.entries(raw)) {
    const name = key as keyof AgentLimits;
    if (!LIMIT_NAMES.includes(name)) {
      throw new CotalError(
        "limits_invalid",
        `Unknown limit "${key.slice(0, 40)}"; use ${LIMIT_NAMES.join(", ")}.`,
      );
    }
    const n = parseAmount(name, v);
    const [lo, hi] = AGENT_LIMIT_BOUNDS[name];
    if (!Number.isSafeInteger(n) || n < lo || n > hi) {
      throw new CotalError(
        "limits_invalid",
        `The ${name} limit must be a whole ${SIZE_LIMITS.has(name) ? "size" : "number"} from ${
          human(name, lo)
        } to ${human(name, hi)}${SIZE_LIMITS.has(name) ? " (K, M and G suffixes allowed)" : ""}.`,
      );
    }
    out[name] = n;
  }
  return out;
}

/** Parses the CLI form `name=value,name=value`. */
export function parseLimitsFlag(text: string): Partial<AgentLimits> {
  const raw: Record<string, string> = {};
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq <= 0) {
      throw new CotalError(
        "limits_invalid",
        `The limit "${part.slice(0, 40)}" is not name=value (for example memory=2G,processes=512).`,
      );
    }
    raw[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return parseLimits(raw);
}

/** Defaults, then the space's choices, then the spawn's; each layer already validated. */
export function resolveLimits(...layers: (Partial<AgentLimits> | undefined)[]): AgentLimits {
  const out: Record<string, number> = { ...DEFAULT_AGENT_LIMITS };
  for (const layer of layers) {
    for (const [k, v] of Object.entries(parseLimits(layer ?? {}))) out[k] = v;
  }
  return Object.freeze(out) as unknown as AgentLimits;
}

/** The nice level whose CFS weight is closest to `cpuShare` % of nice 0's (1.25× per level). */
export function niceFor(cpuShare: number): number {
  const n = Math.round(-Math.log(Math.max(1, cpuShare) / 100) / Math.log(1.25));
  return Math.min(19, Math.max(0, n));
}

/**
 * The exec chain that applies the rlimits, the nice level and the OOM score (util-linux
 * `prlimit` and `choom`, coreutils `nice`) before the next command. The OOM score makes the
 * kernel pick an agent before the broker or a daemon when the machine runs out of memory.
 */
export function limitChain(limits: AgentLimits, opts: { perProcessMemory: boolean }): string[] {
  const rl = [
    `--nproc=${limits.processes}`,
    `--nofile=${limits.openFiles}`,
    `--fsize=${limits.fileSize}`,
    "--core=0",
    ...(opts.perProcessMemory ? [`--data=${limits.memory}`] : []),
  ];
  return [
    "/usr/bin/prlimit",
    ...rl,
    "--",
    "/usr/bin/choom",
    "-n",
    "1000",
    "--",
    "/usr/bin/nice",
    "-n",
    String(niceFor(limits.cpuShare)),
  ];
}

/** The programs {@linkcode limitChain} runs, for the probe's check that they exist. */
export const LIMIT_PROGRAMS: readonly string[] = Object.freeze([
  "/usr/bin/prlimit",
  "/usr/bin/choom",
  "/usr/bin/nice",
]);

/** A line for `ps`: `processes 256, memory 1G (cgroup), ...`. */
export function describeLimits(limits: AgentLimits): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of LIMIT_NAMES) out[name] = human(name, limits[name]);
  return out;
}
