/**
 * The `spawn` command's arguments, validated: everything arrives over the rail as untrusted
 * JSON, so each field is checked and bounded here, and nothing unknown is accepted.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { JsonValue } from "../wire/mod.ts";
import {
  assertConcreteChannel,
  assertValidChannel,
  assertValidRole,
  isLifecycleUid,
  isPrincipalToken,
} from "../wire/mod.ts";
import type { RestartPolicy } from "./managed_agent.ts";
import { type AgentLimits, parseLimits } from "./sandbox/limits.ts";
import { PERSONA_NAME } from "./sandbox/spawn_channel.ts";
import type { NetMode } from "./sandbox/plan.ts";

/** Default restart budget: 3 crashes in a rolling 120 s (the reference's session limit). */
export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({
  restarts: 3,
  windowMs: 120_000,
});
/** Readiness window: the agent's presence must appear within this (reference: 30 s). */
export const READINESS_TIMEOUT_MS = 30_000;

/**
 * Agent names the mesh's own principals use or an operator would trust on sight: refused as a
 * name (and as the start of one), so no agent can pass for the supervisor, the delivery daemon,
 * the auth service or the operator in presence or in a sender field.
 */
export const RESERVED_AGENT_NAMES: readonly string[] = Object.freeze([
  "operator",
  "manager",
  "supervisor",
  "delivery",
  "auth",
  "system",
  "admin",
  "observer",
  "cotal",
  "root",
  "signer",
  "status",
]);

/** Whether `name` is reserved: one of the names above, or one of them and `_...`. */
export function isReservedAgentName(name: string): boolean {
  const n = name.toLowerCase();
  return RESERVED_AGENT_NAMES.some((r) => n === r || n.startsWith(`${r}_`));
}

function assertGrantPattern(channel: string, what: string): void {
  // A grant that starts with a wildcard reaches every channel of the space, today's and any
  // made later (private ones included): name the channels, or a prefix such as team.>.
  const first = channel.split(".")[0];
  if (first === "*" || first === ">") {
    bad(
      `${what} ${
        JSON.stringify(channel)
      } would grant every channel of the space; name the channels, or a prefix such as team.>.`,
    );
  }
}

/** A validated spawn request. */
export interface SpawnRequest {
  /** The connector (agent type); default `task-runner`. */
  readonly agent: string;
  readonly name?: string;
  readonly role?: string;
  readonly description?: string;
  /** The task runner's command, or the program agent's binary (absolute). */
  readonly command?: string;
  readonly args: readonly string[];
  /** The module agent's file on the supervisor's host (copied into the agent's dir). */
  readonly module?: string;
  /** Built-in configuration (the task runner's `timeoutMs`, `maxOutputBytes`). */
  readonly config: { readonly [key: string]: JsonValue };
  readonly subscribe?: readonly string[];
  readonly allowSubscribe?: readonly string[];
  readonly allowPublish: readonly string[];
  /** Operator-trusted: may run without bwrap when it is missing. */
  readonly trusted: boolean;
  readonly restart: RestartPolicy;
  readonly readinessMs: number;
  /** A directory the agent works in, read-write (its cwd). */
  readonly workdir?: string;
  /** Extra paths the agent may read (a harness's install dir, say). */
  readonly expose: readonly string[];
  /** `relay` (default: its own network, the broker only) or `host` (the explicit opt-out). */
  readonly net: NetMode;
  /** Limits for this agent (within the frozen bounds; on top of the space's). */
  readonly limits: Partial<AgentLimits>;
  /** A harness's instructions (its system prompt), lines allowed. */
  readonly prompt?: string;
  /** The model a harness should use. */
  readonly model?: string;
  /**
   * Variables for this agent alone (a harness's provider key): values the caller read from its
   * own environment. Kept in the supervisor's store with the request (for restarts), given to the
   * agent's runner and its program, never written to the launch file or shown by `ps`.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** The personas this agent may spawn, each resolved into a spawn request (delegated_spawn.ts). */
  readonly spawnable?: Readonly<Record<string, { readonly [key: string]: JsonValue }>>;
  /** The lifecycle of the agent that spawned this one (it may despawn it; it ends with it). */
  readonly spawnedBy?: string;
}

/** The most variables one spawn passes, the longest value, and the most in all. */
export const SPAWN_ENV_LIMITS = Object.freeze({
  count: 16,
  valueBytes: 16_384,
  totalBytes: 65_536,
});

/**
 * Variables a spawn may not set: those that change how the runner or the system's programs load
 * and run (the runner is Cotal's own process in the sandbox), and those the sandbox sets itself.
 */
const ENV_RESERVED =
  /^(COTAL_|DENO_|LD_|DYLD_|NODE_|NPM_|LC_)|^(PATH|HOME|USER|LOGNAME|SHELL|TERM|LANG|TZ|PWD|OLDPWD|ENV|BASH_ENV|IFS|PS4|TMPDIR|HOSTNAME|SHLVL|PYTHONPATH|PYTHONSTARTUP|PERL5LIB|RUBYLIB|GCONV_PATH)$/;

function parseEnv(v: unknown): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    bad("env must be an object of variable names and their values.");
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > SPAWN_ENV_LIMITS.count) {
    bad(`env takes at most ${SPAWN_ENV_LIMITS.count} variables.`);
  }
  let total = 0;
  const out: Record<string, string> = {};
  for (const [k, val] of entries) {
    if (!/^[A-Z][A-Z0-9_]{0,63}$/.test(k)) {
      bad(
        `env variable ${JSON.stringify(k.slice(0, 80))} is not a name of capitals, digits and _.`,
      );
    }
    if (ENV_RESERVED.test(k)) {
      bad(
        `env variable ${k} is set by the sandbox or changes how programs load; it cannot be passed.`,
      );
    }
    if (typeof val !== "string" || val.includes("\0")) {
      bad(`env variable ${k} must be text without NUL.`);
    }
    const bytes = new TextEncoder().encode(val).length;
    if (bytes > SPAWN_ENV_LIMITS.valueBytes) {
      bad(`env variable ${k} is longer than ${SPAWN_ENV_LIMITS.valueBytes} bytes.`);
    }
    total += bytes;
    out[k] = val;
  }
  if (total > SPAWN_ENV_LIMITS.totalBytes) {
    bad(`env holds more than ${SPAWN_ENV_LIMITS.totalBytes} bytes in all.`);
  }
  return out;
}

/** The longest instructions a spawn carries for a harness. */
export const MAX_PROMPT_CHARS = 16_384;

const KEYS = [
  "env",
  "prompt",
  "model",
  "agent",
  "name",
  "role",
  "description",
  "command",
  "args",
  "module",
  "config",
  "subscribe",
  "allowSubscribe",
  "allowPublish",
  "trusted",
  "restarts",
  "windowMs",
  "readinessMs",
  "workdir",
  "expose",
  "net",
  "limits",
  "spawnable",
  "spawnedBy",
];

/** The most personas one agent may be allowed to spawn. */
export const MAX_SPAWNABLE = 8;

/**
 * The spawn requests an agent may ask its supervisor for, by persona name (lib/manager/
 * delegated_spawn.ts): each one a complete request, checked as one here, that runs in the
 * default sandbox and may not spawn in turn.
 */
function parseSpawnable(v: unknown): Record<string, { [key: string]: JsonValue }> | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    bad("spawnable must be an object of persona name to spawn request.");
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0 || entries.length > MAX_SPAWNABLE) {
    bad(`spawnable must list 1 to ${MAX_SPAWNABLE} personas.`);
  }
  const out: Record<string, { [key: string]: JsonValue }> = {};
  for (const [persona, t] of entries) {
    if (!PERSONA_NAME.test(persona)) {
      bad(`spawnable's ${JSON.stringify(persona.slice(0, 64))} is not a persona name.`);
    }
    if (typeof t !== "object" || t === null || Array.isArray(t)) {
      bad(`spawnable.${persona} must be a spawn request.`);
    }
    const o = t as Record<string, unknown>;
    for (const k of ["spawnable", "spawnedBy", "name"]) {
      if (o[k] !== undefined) bad(`spawnable.${persona} may not set ${k}.`);
    }
    if (o.trusted === true || o.net === "host") {
      bad(`spawnable.${persona} must run in the default sandbox (no trusted, no net host).`);
    }
    try {
      parseSpawnRequest(o);
    } catch (err) {
      bad(`spawnable.${persona}: ${(err as Error).message}`);
    }
    out[persona] = o as { [key: string]: JsonValue };
  }
  return out;
}

function bad(message: string): never {
  throw new CotalError("spawn_bad_args", message);
}

function str(v: unknown, what: string, max = 4096): string | undefined {
  if (v === undefined) return undefined;
  // deno-lint-ignore no-control-regex
  if (typeof v !== "string" || v === "" || v.length > max || /[\x00-\x1f\x7f]/.test(v)) {
    bad(
      `${what} must be a non-empty string of at most ${max} characters without control characters.`,
    );
  }
  return v;
}

function list(v: unknown, what: string, max = 256): string[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.length > max || v.some((x) => typeof x !== "string")) {
    bad(`${what} must be a list of at most ${max} strings.`);
  }
  return v as string[];
}

function int(v: unknown, what: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) {
    bad(`${what} must be a whole number from ${min} to ${max}.`);
  }
  return v as number;
}

/**
 * An absolute path in its one spelling (a trailing slash aside): no `..`, `.` or empty segment.
 * Every containment check compares paths as strings, so `//P/x` must not pass as another path
 * than `/P/x` (red team 25).
 */
function absolute(v: string | undefined, what: string): string | undefined {
  if (v === undefined) return v;
  const segments = v.replace(/\/+$/, "").split("/").slice(1);
  if (!v.startsWith("/") || segments.some((s) => s === ".." || s === "." || s === "")) {
    bad(`${what} must be an absolute path without '..', '.' or '//'.`);
  }
  return v;
}

function wrapName(check: () => void): void {
  try {
    check();
  } catch (err) {
    bad((err as Error).message);
  }
}

/** Validates a spawn request's args; refuses with `spawn_bad_args` naming the field. */
export function parseSpawnRequest(args: { [key: string]: unknown }): SpawnRequest {
  for (const k of Object.keys(args)) {
    if (!KEYS.includes(k)) {
      bad(`Unknown spawn argument "${k.slice(0, 40)}"; use ${KEYS.join(", ")}.`);
    }
  }
  const agent = str(args.agent, "agent", 64) ?? "task-runner";
  const name = str(args.name, "name", 64);
  if (name !== undefined && !isPrincipalToken(name)) {
    bad(
      `The name ${
        JSON.stringify(name)
      } must be 1-64 characters of [A-Za-z0-9_] (it is the agent's actor).`,
    );
  }
  if (name !== undefined && isReservedAgentName(name)) {
    throw new CotalError(
      "name_reserved",
      `The name ${JSON.stringify(name)} is reserved for the mesh itself (${
        RESERVED_AGENT_NAMES.join(", ")
      }); pick another.`,
    );
  }
  const role = str(args.role, "role", 64);
  if (role !== undefined) wrapName(() => assertValidRole(role));
  const subscribe = list(args.subscribe, "subscribe");
  const allowSubscribe = list(args.allowSubscribe, "allowSubscribe");
  const allowPublish = list(args.allowPublish, "allowPublish") ?? [];
  wrapName(() => {
    for (const c of [...(subscribe ?? []), ...(allowSubscribe ?? [])]) assertValidChannel(c);
    for (const c of allowPublish) assertConcreteChannel(c);
  });
  for (const c of subscribe ?? []) assertGrantPattern(c, "subscribe");
  for (const c of allowSubscribe ?? []) assertGrantPattern(c, "allowSubscribe");
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null || Array.isArray(config)) {
    bad("config must be an object.");
  }
  if (args.trusted !== undefined && typeof args.trusted !== "boolean") {
    bad("trusted must be a boolean.");
  }
  const command = absolute(str(args.command, "command"), "command");
  const module = absolute(str(args.module, "module"), "module");
  if (agent === "module" && !module) {
    bad("The module agent needs module: the path of its .ts or .js file.");
  }
  if (module !== undefined && !/\.(ts|js|mjs)$/.test(module)) {
    bad("module must name a .ts, .js or .mjs file.");
  }
  const workdir = absolute(str(args.workdir, "workdir", 1024), "workdir");
  const expose = (list(args.expose, "expose", 16) ?? []).map((p, i) =>
    absolute(str(p, `expose[${i}]`, 1024), "expose")!
  );
  if (args.net !== undefined && args.net !== "relay" && args.net !== "host") {
    bad('net must be "relay" (the agent\'s own network, the broker only) or "host".');
  }
  let limits: Partial<AgentLimits>;
  try {
    limits = parseLimits(args.limits);
  } catch (err) {
    bad((err as Error).message);
  }
  if (agent === "task-runner" && !command) {
    bad("The task runner needs command: the absolute path of the program each task runs.");
  }
  const prompt = args.prompt;
  if (
    prompt !== undefined &&
    (typeof prompt !== "string" || prompt === "" || prompt.length > MAX_PROMPT_CHARS ||
      // deno-lint-ignore no-control-regex
      /[\x00-\x08\x0b-\x1f\x7f]/.test(prompt))
  ) {
    bad(
      `prompt must be text of at most ${MAX_PROMPT_CHARS} characters (lines and tabs allowed, no other control characters).`,
    );
  }
  const model = str(args.model, "model", 128);
  if (model !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._:\/-]*$/.test(model)) {
    bad("model must be a model name of letters, digits and . _ : / -, like claude-sonnet-4-5.");
  }
  const env = parseEnv(args.env);
  const spawnable = parseSpawnable(args.spawnable);
  const spawnedBy = str(args.spawnedBy, "spawnedBy", 64);
  if (spawnedBy !== undefined && !isLifecycleUid(spawnedBy)) {
    bad("spawnedBy must be the lifecycle uid of the agent that spawned this one.");
  }
  return {
    ...(spawnable ? { spawnable } : {}),
    ...(spawnedBy ? { spawnedBy } : {}),
    ...(env && Object.keys(env).length ? { env } : {}),
    ...(prompt !== undefined ? { prompt: prompt as string } : {}),
    ...(model !== undefined ? { model } : {}),
    agent,
    ...(name ? { name } : {}),
    ...(role ? { role } : agent === "task-runner" ? { role: "tasks" } : {}),
    ...(args.description !== undefined
      ? { description: str(args.description, "description", 200) }
      : {}),
    ...(command ? { command } : {}),
    args: list(args.args, "args") ?? [],
    ...(module ? { module } : {}),
    config: config as { [key: string]: JsonValue },
    ...(subscribe ? { subscribe } : {}),
    ...(allowSubscribe ? { allowSubscribe } : {}),
    allowPublish,
    trusted: args.trusted === true,
    restart: {
      restarts: int(args.restarts, "restarts", 0, 20) ?? DEFAULT_RESTART_POLICY.restarts,
      windowMs: int(args.windowMs, "windowMs", 1_000, 3_600_000) ??
        DEFAULT_RESTART_POLICY.windowMs,
    },
    readinessMs: int(args.readinessMs, "readinessMs", 1_000, 300_000) ?? READINESS_TIMEOUT_MS,
    ...(workdir ? { workdir } : {}),
    expose,
    net: (args.net as NetMode | undefined) ?? "relay",
    limits,
  };
}

/**
 * Refuses a spawn whose program does not exist or cannot be run, before any sandbox is made
 * (an agent that cannot start would otherwise fail its readiness wait or its restart budget).
 */
export async function assertProgram(path: string): Promise<void> {
  let st: Deno.FileInfo;
  try {
    st = await Deno.stat(path);
  } catch {
    throw new CotalError(
      "program_not_found",
      `The program ${JSON.stringify(path)} does not exist; name an absolute path to an executable.`,
    );
  }
  if (!st.isFile || st.mode === null || (st.mode & 0o111) === 0) {
    throw new CotalError(
      "program_not_executable",
      `The program ${JSON.stringify(path)} is not an executable file; check its path and mode.`,
    );
  }
}
