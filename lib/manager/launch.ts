/**
 * Launch material: everything one agent runner needs to start, in one 0600 JSON file inside
 * the agent's directory. Its path rides in the one env var {@linkcode LAUNCH_ENV}; nothing
 * secret ever rides argv or the environment, where `/proc/<pid>/cmdline` and `environ` or a
 * child's inherited env would show it.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { PERSONA_NAME } from "./sandbox/spawn_channel.ts";
import { isRelayedCreds, parseCreds, parseRelayedCreds } from "../nats/mod.ts";
import type { JsonValue } from "../wire/mod.ts";
import {
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidPrincipal,
  type Principal,
} from "../wire/mod.ts";

/** The env var carrying the launch file's path. */
export const LAUNCH_ENV = "COTAL_LAUNCH";
/** The format tag every launch file carries. */
export const LAUNCH_FORMAT = "cotal-launch/v1";
/** The launch file's name inside the agent's launch dir. */
export const LAUNCH_FILE = "launch.json";

/**
 * What the runner fills in a program agent's arguments with its own values, the paths as the
 * sandbox sees them: the launch file, the agent's home and Deno's module cache. A connector
 * points a harness at `cotal mcp` with them.
 */
export const RUNNER_PLACEHOLDERS = Object.freeze({
  launch: "@@COTAL_LAUNCH@@",
  home: "@@HOME@@",
  denoDir: "@@DENO_DIR@@",
});
/** Launch files are small; a bigger one is refused before it is parsed. */
export const MAX_LAUNCH_BYTES = 1 << 20;

/** The non-secret part of an agent's identity card. */
export interface AgentCard {
  readonly name: string;
  readonly role?: string;
  readonly description?: string;
}

/** How the agent authenticates: static creds text, or a user-mode bearer source. */
export type AgentAuth =
  | { readonly kind: "creds"; readonly creds: string }
  | {
    readonly kind: "bearer";
    /** The sentinel creds the bearer rides on (user mode). */
    readonly sentinelCreds: string;
    /** Where the runner exchanges its actor token for short-lived bearers. */
    readonly tokenUrl: string;
    readonly actorToken: string;
  };

/**
 * What to run. `module` is a TypeScript file inside the agent's dir, `builtin` a Cotal agent by
 * name; both run in the runner's process and may declare the one `program` they are allowed to
 * start. `program` is an external executable the runner starts inside its own sandbox.
 */
export type AgentSpec =
  | { readonly kind: "module"; readonly module: string; readonly program?: string }
  | {
    readonly kind: "builtin";
    readonly name: string;
    readonly config?: { readonly [key: string]: JsonValue };
    readonly program?: string;
  }
  | { readonly kind: "program"; readonly command: string; readonly args: readonly string[] };

/**
 * Where the runner finds the supervisor and does its work, as paths it sees (inside bwrap:
 * `/run/cotal/control.sock`, `/home/agent`).
 */
export interface LaunchSandbox {
  /** The supervisor's control channel (stop requests), a unix socket. */
  readonly control: string;
  /** The broker relay's unix socket: the runner forwards `servers` (loopback) to it. */
  readonly relay?: string;
  /** The agent's own home. */
  readonly home: string;
  /** Its spawn channel and the personas it may spawn there (lib/manager/delegated_spawn.ts). */
  readonly spawn?: { readonly socket: string; readonly personas: readonly string[] };
  /** The operator-declared working directory (the agent's cwd when set). */
  readonly workdir?: string;
}

/** The whole launch file. */
export interface LaunchMaterial {
  /** Always {@linkcode LAUNCH_FORMAT}; a different tag is refused, not guessed at. */
  readonly format: typeof LAUNCH_FORMAT;
  /** Broker addresses the agent connects to. */
  readonly servers: readonly string[];
  /** The space's name (the display form; subjects use its token). */
  readonly space: string;
  /** Who the agent is on the wire: the `(owner, actor)` its creds are minted for. */
  readonly principal: Principal;
  readonly card: AgentCard;
  /** This incarnation's id: a respawn gets a new one, so stale state is told apart. */
  readonly lifecycleUid: string;
  /** The channels the agent joins at start (its spawn's subscribe list). */
  readonly channels?: readonly string[];
  /** The secret part: creds text or a bearer source. */
  readonly auth: AgentAuth;
  /** What the runner runs. */
  readonly agent: AgentSpec;
  /** The runner's channels and dirs (absent only for a runner started by hand in tests). */
  readonly sandbox?: LaunchSandbox;
}

/** Where an agent's launch file lives by default. */
export function launchFilePath(agentDir: string): string {
  return `${agentDir}/${LAUNCH_FILE}`;
}

/** The one external program an agent may start (what `--allow-run` grants), if any. */
export function declaredProgram(spec: AgentSpec): string | undefined {
  return spec.kind === "program" ? spec.command : spec.program;
}

function bad(field: string, want: string): CotalError {
  return new CotalError(
    "launch_invalid",
    `The launch material's ${field} must be ${want}; regenerate the launch file from the supervisor.`,
  );
}

/** Runs a shared validator and reports its refusal as this file's `launch_invalid`. */
function wrap<T>(field: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new CotalError(
      "launch_invalid",
      `The launch material's ${field} is invalid: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** Drops undefined fields so a parsed file equals its JSON round trip. */
function compact<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(o: Record<string, unknown>, key: string, field: string, max = 4096): string {
  const v = o[key];
  // Control characters are refused: these strings reach argv, terminals and logs.
  if (typeof v !== "string" || v === "" || v.length > max || hasControl(v)) {
    throw bad(field, `a non-empty string of at most ${max} characters without control characters`);
  }
  return v;
}

function hasControl(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

function optStr(o: Record<string, unknown>, key: string, field: string): string | undefined {
  return o[key] === undefined ? undefined : str(o, key, field);
}

function only(o: Record<string, unknown>, keys: string[], field: string): void {
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) {
      throw bad(`${field} key "${k.slice(0, 40)}"`, `one of ${keys.join(", ")}`);
    }
  }
}

function secret(o: Record<string, unknown>, key: string, field: string): string {
  const v = o[key];
  // Secret text may span lines, so only its type and size are checked here; never echoed.
  if (typeof v !== "string" || v === "" || v.length > 64 * 1024) {
    throw bad(field, "non-empty text of at most 64 KiB");
  }
  return v;
}

function parseModulePath(o: Record<string, unknown>): string {
  const path = str(o, "module", "agent.module");
  // Relative and inside the agent's dir: the runner may read nothing else.
  if (path.startsWith("/") || path.split("/").some((seg) => seg === ".." || seg === "")) {
    throw bad("agent.module", "a relative path inside the agent's directory (no '..')");
  }
  return path;
}

function parseAgent(v: unknown): AgentSpec {
  if (!isRecord(v)) throw bad("agent", "an object { kind, ... }");
  switch (v.kind) {
    case "module":
      only(v, ["kind", "module", "program"], "agent");
      return compact({
        kind: "module",
        module: parseModulePath(v),
        program: optStr(v, "program", "agent.program"),
      });
    case "builtin": {
      only(v, ["kind", "name", "config", "program"], "agent");
      const name = str(v, "name", "agent.name", 64);
      if (v.config !== undefined && !isRecord(v.config)) throw bad("agent.config", "an object");
      return compact({
        kind: "builtin",
        name,
        config: v.config as { [key: string]: JsonValue } | undefined,
        program: optStr(v, "program", "agent.program"),
      });
    }
    case "program": {
      only(v, ["kind", "command", "args"], "agent");
      const command = str(v, "command", "agent.command");
      const args = v.args ?? [];
      if (!Array.isArray(args) || args.length > 256 || args.some((a) => typeof a !== "string")) {
        throw bad("agent.args", "a list of at most 256 strings");
      }
      return { kind: "program", command, args: [...args] as string[] };
    }
    default:
      throw bad("agent.kind", `"module", "builtin" or "program"`);
  }
}

function absPath(o: Record<string, unknown>, key: string, field: string): string {
  const v = str(o, key, field, 1024);
  if (!v.startsWith("/") || v.split("/").includes("..")) {
    throw bad(field, "an absolute path without '..'");
  }
  return v;
}

function parseSandbox(v: unknown): LaunchSandbox | undefined {
  if (v === undefined) return undefined;
  if (!isRecord(v)) throw bad("sandbox", "an object { control, relay?, home, workdir?, spawn? }");
  only(v, ["control", "relay", "home", "workdir", "spawn"], "sandbox");
  return compact({
    control: absPath(v, "control", "sandbox.control"),
    relay: v.relay === undefined ? undefined : absPath(v, "relay", "sandbox.relay"),
    home: absPath(v, "home", "sandbox.home"),
    workdir: v.workdir === undefined ? undefined : absPath(v, "workdir", "sandbox.workdir"),
    spawn: v.spawn === undefined ? undefined : parseSpawnPlace(v.spawn),
  });
}

function parseSpawnPlace(v: unknown): { socket: string; personas: string[] } {
  const want = "an object { socket, personas: [1-8 persona names] }";
  if (!isRecord(v)) throw bad("sandbox.spawn", want);
  only(v, ["socket", "personas"], "sandbox.spawn");
  const personas = v.personas;
  if (
    !Array.isArray(personas) || personas.length === 0 || personas.length > 8 ||
    personas.some((p) => typeof p !== "string" || !PERSONA_NAME.test(p))
  ) {
    throw bad("sandbox.spawn.personas", want);
  }
  return { socket: absPath(v, "socket", "sandbox.spawn.socket"), personas: [...personas] };
}

function parseChannels(v: unknown): string[] {
  if (!Array.isArray(v) || v.length > 256 || v.some((c) => typeof c !== "string")) {
    throw bad("channels", "a list of at most 256 channel names");
  }
  return v.map((c) => wrap("channels", () => (assertValidChannel(c), c as string)));
}

function parseAuth(v: unknown): AgentAuth {
  if (!isRecord(v)) throw bad("auth", "an object { kind, ... }");
  if (v.kind === "creds") {
    only(v, ["kind", "creds"], "auth");
    return { kind: "creds", creds: secret(v, "creds", "auth.creds") };
  }
  if (v.kind === "bearer") {
    only(v, ["kind", "sentinelCreds", "tokenUrl", "actorToken"], "auth");
    const tokenUrl = str(v, "tokenUrl", "auth.tokenUrl");
    if (!/^https?:\/\/[^\s]+$/.test(tokenUrl)) throw bad("auth.tokenUrl", "an http(s) URL");
    return {
      kind: "bearer",
      sentinelCreds: secret(v, "sentinelCreds", "auth.sentinelCreds"),
      tokenUrl,
      actorToken: secret(v, "actorToken", "auth.actorToken"),
    };
  }
  throw bad("auth.kind", `"creds" or "bearer"`);
}

/**
 * Validates parsed JSON as launch material (synchronous shape checks only; see
 * {@linkcode readLaunchMaterial} for the creds check). Throws `launch_invalid` naming the field.
 */
export function parseLaunchMaterial(v: unknown): LaunchMaterial {
  if (!isRecord(v)) throw bad("top level", "a JSON object");
  only(
    v,
    [
      "format",
      "servers",
      "space",
      "principal",
      "card",
      "lifecycleUid",
      "channels",
      "auth",
      "agent",
      "sandbox",
    ],
    "top-level",
  );
  if (v.format !== LAUNCH_FORMAT) throw bad("format", `"${LAUNCH_FORMAT}"`);
  const servers = v.servers;
  if (
    !Array.isArray(servers) || servers.length === 0 || servers.length > 32 ||
    servers.some((s) => typeof s !== "string" || !/^([a-z]+:\/\/)?[^\s/]+(:\d+)?$/.test(s))
  ) {
    throw bad("servers", "a list of 1-32 broker addresses (host:port or nats://host:port)");
  }
  const space = str(v, "space", "space", 128);
  if (!isRecord(v.principal)) throw bad("principal", "an object { owner, actor }");
  only(v.principal, ["owner", "actor"], "principal");
  const principal = wrap("principal", () => assertValidPrincipal(v.principal as Principal));
  if (!isRecord(v.card)) throw bad("card", "an object { name, role?, description? }");
  only(v.card, ["name", "role", "description"], "card");
  const card: AgentCard = compact({
    name: str(v.card, "name", "card.name", 128),
    role: optStr(v.card, "role", "card.role"),
    description: optStr(v.card, "description", "card.description"),
  });
  const lifecycleUid = v.lifecycleUid;
  wrap("lifecycleUid", () => assertValidLifecycleUid(lifecycleUid));
  return {
    format: LAUNCH_FORMAT,
    servers: [...servers],
    space,
    principal,
    card,
    lifecycleUid: lifecycleUid as string,
    auth: parseAuth(v.auth),
    ...(v.channels !== undefined ? { channels: parseChannels(v.channels) } : {}),
    agent: parseAgent(v.agent),
    ...(v.sandbox !== undefined ? { sandbox: parseSandbox(v.sandbox) } : {}),
  };
}

/**
 * Writes launch material atomically (temp file in the same dir, 0600, then rename) so a runner
 * never reads a half-written file and the file is never briefly readable by others. `owner`
 * is the agent's uid and gid when the agent runs as its own user (a root supervisor).
 */
export async function writeLaunchMaterial(
  path: string,
  material: LaunchMaterial,
  owner?: { uid: number; gid: number },
): Promise<void> {
  const checked = parseLaunchMaterial(material);
  await checkCreds(checked);
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(tmp, JSON.stringify(checked), { mode: 0o600, createNew: true });
    await Deno.chmod(tmp, 0o600);
    if (owner) await Deno.chown(tmp, owner.uid, owner.gid);
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
}

/**
 * Reads and validates launch material. Refuses a symlink, a file others can read or write, an
 * oversized or non-JSON file, any malformed field, and creds text that does not parse; each
 * with a CotalError code (`launch_missing`, `launch_symlink`, `launch_mode`, `launch_too_big`,
 * `launch_malformed`, `launch_invalid`) and never with the file's bytes in the message.
 */
export async function readLaunchMaterial(path: string): Promise<LaunchMaterial> {
  let st: Deno.FileInfo;
  try {
    st = await Deno.lstat(path);
  } catch (err) {
    throw new CotalError(
      "launch_missing",
      `Cannot read the launch file ${path} (${
        (err as Error).name
      }); the supervisor writes it before starting the runner.`,
    );
  }
  if (st.isSymlink) {
    throw new CotalError(
      "launch_symlink",
      `The launch file ${path} is a symlink; it must be a regular file the supervisor wrote.`,
    );
  }
  if (!st.isFile) throw new CotalError("launch_missing", `The launch file ${path} is not a file.`);
  if (st.mode !== null && (st.mode & 0o077) !== 0) {
    throw new CotalError(
      "launch_mode",
      `The launch file ${path} has mode ${
        (st.mode & 0o777).toString(8)
      }; it holds credentials and must be 0600.`,
    );
  }
  if (st.size > MAX_LAUNCH_BYTES) {
    throw new CotalError(
      "launch_too_big",
      `The launch file ${path} is ${st.size} bytes, over the ${MAX_LAUNCH_BYTES}-byte limit; regenerate it.`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(await Deno.readTextFile(path));
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) throw err;
    throw new CotalError(
      "launch_malformed",
      `The launch file ${path} is not valid JSON; regenerate it from the supervisor.`,
    );
  }
  const material = parseLaunchMaterial(value);
  await checkCreds(material);
  return material;
}

async function checkCreds(material: LaunchMaterial): Promise<void> {
  const [field, text] = material.auth.kind === "creds"
    ? ["auth.creds", material.auth.creds]
    : ["auth.sentinelCreds", material.auth.sentinelCreds];
  try {
    // A sandboxed agent's creds are relayed: its JWT alone (the relay holds the seed).
    if (isRelayedCreds(text)) parseRelayedCreds(text);
    else await parseCreds(text);
  } catch (err) {
    // Only the code: parse errors about secret text must not quote it.
    throw new CotalError(
      "launch_invalid",
      `The launch material's ${field} does not parse (${
        (err as CotalError).code ?? "error"
      }); regenerate it from the supervisor.`,
    );
  }
}
