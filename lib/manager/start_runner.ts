/**
 * Starting one agent runner: `bwrap <the allowlist sandbox> -- <limits> [setpriv] deno run <the
 * cotal-agent row> cmd/agent.ts` (or, under `deno-only`, the runner alone), with an environment
 * holding only the agent allowlist and COTAL_LAUNCH, through a runtime (the pty by default).
 * The spawn itself hands bwrap its seccomp program and, when the agent has a cgroup, puts the
 * sandbox's first process into it before that process forks anything.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { AGENT_ENV_ALLOWLIST, denoRunFlags, type DeploymentLayout } from "../permissions.ts";
import type { LaunchSpec, Runtime, RuntimeHandle, SpawnOptions } from "../registry.ts";
import { type AgentSpec, declaredProgram, LAUNCH_ENV, LAUNCH_FILE } from "./launch.ts";
import { createRuntime } from "./pty_runtime.ts";
import type { AgentCgroup } from "./sandbox/cgroup.ts";
import { joinAgentCgroup } from "./sandbox/cgroup.ts";
import type { Isolation } from "./sandbox/isolation.ts";
import type { AgentLimits } from "./sandbox/limits.ts";
import {
  bwrapArgs,
  CONTROL_SOCKET_INSIDE,
  HOME_INSIDE,
  isInside,
  LAUNCH_DIR_INSIDE,
  type NetMode,
  SANDBOX_PATH,
} from "./sandbox/plan.ts";
import { RELAY_PORT } from "./sandbox/relay.ts";
import { seccompFilter } from "./sandbox/seccomp.ts";
import { awaitChildPid, type ChildFds, releaseBlock, spawnWithFds } from "./sandbox/spawn_fds.ts";
import { closeFd, signalProcess } from "./sandbox/libc.ts";

/** The agent-specific sandbox resources a runner is started with (see `AgentSandbox`). */
export interface RunnerSandbox {
  readonly controlSocket: string;
  readonly brokerSocket?: string;
  /** Its relay's loopback port (an agent on the host's network or under Deno permissions). */
  readonly brokerPort?: number;
  readonly spawnSocket?: string;
  readonly net: NetMode;
  readonly uid: number;
  readonly gid: number;
  readonly switchUser: boolean;
  readonly limits: AgentLimits;
  readonly etcFiles: Readonly<Record<string, string>>;
  readonly workdir?: string;
  /** Read-only extras the operator exposed. */
  readonly expose: readonly string[];
  readonly cgroup?: AgentCgroup;
  /** Its own capped devpts instance (see `AgentSandbox`). */
  readonly ptsDir?: string;
  /** Its processes take the Landlock scope (see `AgentSandbox.landlockScope`). */
  readonly landlockScope?: boolean;
}

/** Everything needed to render one runner's command line. */
export interface RunnerOptions {
  readonly layout: DeploymentLayout;
  /** The agent's launch dir on the host (supervisor-owned; read-only to the agent). */
  readonly agentDir: string;
  /** The agent spec written to the launch file (for its declared program). */
  readonly spec: AgentSpec;
  /** From `resolveIsolation` / `chooseIsolation`. */
  readonly isolation: Isolation;
  readonly sandbox: RunnerSandbox;
  /**
   * Values for the agent's environment; every name must be in the allowlist (or the layout's
   * `agentEnvPassThrough`). Default: those names copied from the supervisor's environment.
   */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Variables for this agent alone (its spawn request's `env`, names checked there): added to
   * the allowlist's, under the sandbox's own (HOME, COTAL_LAUNCH, ...), which always win.
   */
  readonly extraEnv?: Readonly<Record<string, string>>;
  /** Detach from the controlling terminal (default: only outside a pty). */
  readonly newSession?: boolean;
  /** The terminal type a pty agent sees (default `xterm-256color`). */
  readonly term?: string;
  /** The deno binary (default `Deno.execPath()`). */
  readonly deno?: string;
  /** The runner entry point (default this checkout's cmd/agent.ts). */
  readonly entry?: string;
  /** deno.json, for the import map (default this checkout's). */
  readonly config?: string;
  /** Deno's module cache (default {@linkcode denoDir}). */
  readonly denoDir?: string;
}

/** Where Deno keeps its module cache for this process (what the runner needs, read-only). */
export function denoDir(): string {
  const explicit = Deno.env.get("DENO_DIR");
  if (explicit) return explicit;
  const cache = Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache`;
  return `${cache}/deno`;
}

/**
 * The parts of Deno's module cache a runner needs: the public npm registry's packages (Deno
 * checks the lockfile's whole npm snapshot at start) and the runner's own transpiled code.
 * Never the whole cache: it holds the transpiled source of every script the operator ever ran,
 * other meshes' agent modules, and code caches naming their files.
 */
export function runnerCacheView(config: string, cacheDir: string): string[] {
  const checkout = dirOf(config);
  return [
    `${cacheDir}/npm/registry.npmjs.org`,
    `${cacheDir}/gen/file${checkout}/cmd`,
    `${cacheDir}/gen/file${checkout}/lib`,
  ].filter(exists);
}

function dirOf(path: string): string {
  return path.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Host dirs every sandbox binds read-only already: a program under them needs no bind of its own. */
export const SYSTEM_PREFIXES: readonly string[] = ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"];

function agentEnv(opts: RunnerOptions, inside: Record<string, string>): Record<string, string> {
  const allowed = new Set([...AGENT_ENV_ALLOWLIST, ...(opts.layout.agentEnvPassThrough ?? [])]);
  allowed.delete(LAUNCH_ENV);
  const env: Record<string, string> = {};
  if (opts.env) {
    for (const [k, v] of Object.entries(opts.env)) {
      if (!allowed.has(k)) {
        throw new CotalError(
          "runner_env_not_allowed",
          `The agent env variable ${k} is not in the allowlist; add it to agentEnvPassThrough if agents need it.`,
        );
      }
      env[k] = v;
    }
  } else {
    for (const k of allowed) {
      const v = Deno.env.get(k);
      if (v !== undefined) env[k] = v;
    }
  }
  return { ...env, ...opts.extraEnv, ...inside };
}

/**
 * Renders the runner's launch spec: command, argv, the whole environment and the working dir.
 * `fds` are the descriptors bwrap inherits (from `spawnWithFds`); without them the spec has no
 * seccomp filter, which only a test that inspects argv should ever want.
 */
export function runnerLaunchSpec(opts: RunnerOptions, fds: ChildFds = {}): LaunchSpec {
  const agentDir = opts.agentDir.replace(/\/+$/, "");
  if (!agentDir.startsWith("/") || agentDir.split("/").includes("..")) {
    throw new CotalError(
      "runner_bad_paths",
      `The agent dir ${agentDir} must be an absolute path without '..'.`,
    );
  }
  const sb = opts.sandbox;
  const bwrap = opts.isolation.mode === "bwrap";
  if (bwrap && !opts.isolation.bwrap) {
    throw new CotalError(
      "sandbox_unavailable",
      "bwrap isolation was chosen without a bwrap binary; resolve the isolation with resolveIsolation().",
    );
  }
  const launchDir = bwrap ? LAUNCH_DIR_INSIDE : agentDir;
  const home = bwrap ? HOME_INSIDE : `${agentDir}/home`;
  const control = bwrap ? CONTROL_SOCKET_INSIDE : sb.controlSocket;
  const launchFile = `${launchDir}/${LAUNCH_FILE}`;
  const program = declaredProgram(opts.spec);
  const inside: Record<string, string> = {
    HOME: home,
    [LAUNCH_ENV]: launchFile,
    // The runner's module cache (read-only inside bwrap): HOME is the agent's own now.
    DENO_DIR: opts.denoDir ?? denoDir(),
    DENO_NO_UPDATE_CHECK: "1",
    ...(bwrap ? { PATH: SANDBOX_PATH, USER: "agent", LOGNAME: "agent" } : {}),
    ...(opts.term ? { TERM: opts.term } : {}),
  };
  const env = agentEnv(opts, inside);
  const config = opts.config ?? new URL("../../deno.json", import.meta.url).pathname;
  const entry = opts.entry ?? new URL("../../cmd/agent.ts", import.meta.url).pathname;
  const relay = bwrap && sb.net === "relay";
  const sockets = [control, ...(relay ? [`${dirOf(control)}/broker.sock`] : [])];
  const denoArgs = [
    "run",
    ...denoRunFlags("cotal-agent", opts.layout, {
      launchDir,
      launchFile,
      home,
      ...(sb.workdir ? { workdir: sb.workdir } : {}),
      ...(bwrap ? { tmp: "/tmp" } : {}),
      sockets,
      // The runner reaches the broker only through its relay: the broker's own port is
      // not in its row (and the agent's launch creds connect nowhere else).
      ...(relay
        ? { net: [`127.0.0.1:${RELAY_PORT}`] }
        : sb.brokerPort !== undefined
        ? { net: [`127.0.0.1:${sb.brokerPort}`] }
        : {}),
      program,
      envAllow: Object.keys(env),
    }),
    `--config=${config}`,
    entry,
  ];
  const deno = opts.deno ?? Deno.execPath();
  if (!bwrap) return { command: deno, args: denoArgs, env, cwd: sb.workdir ?? home };
  const checkout = dirOf(config);
  const code = [
    deno,
    ...runnerCacheView(config, env.DENO_DIR),
    config,
    `${checkout}/deno.lock`,
    `${checkout}/lib`,
    `${checkout}/cmd`,
    dirOf(entry),
  ].filter((p, i, all) => all.indexOf(p) === i && exists(p));
  // A path under the agent's workdir (or its own dir) is the agent's to rename: bound on its
  // own, its source would be looked up by bwrap (as root) through whatever link the agent
  // planted in its place, binding a host file of the agent's choosing (red team 23). The
  // workdir's own bind already shows it, at the same path.
  // As the spawn gave them, a trailing slash included.
  const agentOwned = [sb.workdir, agentDir].filter((d): d is string => d !== undefined)
    .map((d) => d.replace(/\/+$/, "") || "/");
  const expose = [...sb.expose, ...(program ? [program] : [])].filter((p) =>
    !SYSTEM_PREFIXES.some((s) => p.startsWith(s)) && !agentOwned.some((d) => isInside(p, d))
  );
  const args = bwrapArgs({
    launchDir: agentDir,
    etcFiles: sb.etcFiles,
    controlSocket: sb.controlSocket,
    ...(sb.brokerSocket ? { brokerSocket: sb.brokerSocket } : {}),
    ...(sb.spawnSocket ? { spawnSocket: sb.spawnSocket } : {}),
    net: sb.net,
    ...(sb.workdir ? { workdir: sb.workdir } : {}),
    expose,
    code,
    denoCache: env.DENO_DIR,
    limits: sb.limits,
    cgroupMemory: !!sb.cgroup,
    ...(sb.ptsDir ? { ptsDir: sb.ptsDir } : {}),
    uid: sb.uid,
    gid: sb.gid,
    switchUser: sb.switchUser,
    env,
    ...(fds.seccomp !== undefined ? { seccompFd: fds.seccomp } : {}),
    ...(sb.landlockScope ? { landlockScope: true } : {}),
    ...(fds.info !== undefined ? { infoFd: fds.info } : {}),
    ...(fds.block !== undefined ? { blockFd: fds.block } : {}),
    newSession: opts.newSession,
  });
  return {
    command: opts.isolation.bwrap!,
    args: [...args, deno, ...denoArgs],
    // bwrap itself gets the same minimal env: its pid-1 reaper's /proc/1/environ is visible
    // inside the sandbox, so anything given to bwrap would be readable by the agent.
    env,
    cwd: agentDir,
  };
}

/** A started runner: its handle, and what was run. */
export interface StartedRunner {
  readonly handle: RuntimeHandle;
  readonly spec: LaunchSpec;
  readonly isolation: Isolation;
  readonly runtime: string;
}

/**
 * Starts one agent runner through `runtime` (default: the registry's `pty`). Outside a pty the
 * sandbox also starts a new session, so the agent cannot reach the supervisor's terminal. A
 * pty agent's TERM defaults to `xterm-256color`. A sandbox that fails to start is tried once
 * more, a second later.
 */
export async function startRunner(
  opts: RunnerOptions & { readonly runtime?: Runtime } & SpawnOptions & {
    /** Told why a first sandbox start failed, before the one more try. */
    readonly onRetry?: (why: string) => void;
  },
): Promise<StartedRunner> {
  try {
    return await startRunnerOnce(opts);
  } catch (err) {
    // A sandbox bwrap could not set up once (the kernel's namespace clone past its deadline on
    // a loaded machine, bwrap ending before it reported the sandbox's pid) is tried once more:
    // what bwrap refuses for good fails the same way again. The first attempt's processes are
    // gone by now (startRunnerOnce kills them before it throws).
    if (!(err instanceof CotalError) || err.code !== "sandbox_start_failed") throw err;
    opts.onRetry?.(err.message);
    await new Promise((r) => setTimeout(r, SANDBOX_RETRY_MS));
    return await startRunnerOnce(opts);
  }
}

/** The pause before a failed sandbox start is tried once more. */
export const SANDBOX_RETRY_MS = 1_000;

async function startRunnerOnce(
  opts: RunnerOptions & { readonly runtime?: Runtime } & SpawnOptions,
): Promise<StartedRunner> {
  const runtime = opts.runtime ?? await createRuntime("pty");
  const pty = runtime.name === "pty";
  const o: RunnerOptions = {
    ...opts,
    newSession: opts.newSession ?? !pty,
    ...(pty ? { term: opts.term ?? "xterm-256color" } : {}),
  };
  const bwrap = opts.isolation.mode === "bwrap";
  if (bwrap) await assertBindsUnmoved(opts.sandbox);
  const cgroup = bwrap ? opts.sandbox.cgroup : undefined;
  const { result, sync } = await spawnWithFds(
    {
      ...(bwrap
        ? {
          seccomp: seccompFilter(Deno.build.arch, {
            hostNet: opts.sandbox.net === "host",
          }),
        }
        : {}),
      sync: !!cgroup,
    },
    async (fds) => {
      const spec = runnerLaunchSpec(o, fds);
      const handle = await runtime.spawn(spec, { cols: opts.cols, rows: opts.rows });
      return { spec, handle };
    },
  );
  if (cgroup && sync) {
    let child: number | undefined;
    // What bwrap says before the sandbox runs is its own error ("bwrap: Can't mount ..."): kept
    // so a failed start names its cause.
    const early = boundedOutput(result.handle);
    const exited = new Promise<void>((res) => result.handle.onExit(() => res()));
    try {
      child = await awaitChildPid(sync.infoRead);
      joinAgentCgroup(cgroup, child);
    } catch (err) {
      // Never let a sandbox outside its cgroup go on: its first process (the PID namespace's
      // init, whose death ends the namespace) and bwrap itself are killed before the block
      // pipe closes.
      const gone = child !== undefined && !processExists(child);
      if (child) signalProcess(child, "SIGKILL");
      signalProcess(result.handle.pid, "SIGKILL");
      closeFd(sync.blockWrite);
      // bwrap prints its reason as it exits: wait (briefly) for it.
      await deadline(exited, 2_000);
      early.stop();
      const said = early.text();
      const why = gone
        ? new CotalError(
          "sandbox_start_failed",
          "the sandbox ended while bwrap was setting it up.",
        )
        : err;
      if (why instanceof CotalError && said) {
        throw new CotalError(why.code, `${why.message} bwrap said: ${said}`);
      }
      throw why;
    }
    early.stop();
    releaseBlock(sync.blockWrite);
  }
  return {
    handle: result.handle,
    spec: result.spec,
    isolation: opts.isolation,
    runtime: runtime.name,
  };
}

/** The first bytes a handle prints, as one printable line (at most 300 characters). */
/**
 * Refuses a start whose workdir or exposed paths now resolve elsewhere than when they were
 * checked at spawn (a link put in their place since): bwrap, as root, would bind whatever the
 * link points at. Paths no agent can change are the spawn's rule (`assertNoSharedTree`); this is
 * the check at every restart besides.
 */
async function assertBindsUnmoved(sb: RunnerSandbox): Promise<void> {
  for (const path of [...(sb.workdir ? [sb.workdir] : []), ...sb.expose]) {
    const given = path.replace(/\/+$/, "") || "/";
    // A path that is gone binds nothing: bwrap refuses the start in its own words.
    const real = await Deno.realPath(given).catch(() => given);
    if (real !== given) {
      throw new CotalError(
        "sandbox_path_refused",
        `${given} now resolves to ${real} (a link in its place) since the agent was spawned; it is not bound in. Restore it, or despawn the agent and spawn it again.`,
      );
    }
  }
}

function boundedOutput(handle: RuntimeHandle): { text(): string; stop(): void } {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const stop = handle.onData((d) => {
    if (size >= 4096) return;
    chunks.push(d.slice(0, 4096 - size));
    size += Math.min(d.length, 4096 - size);
  });
  return {
    stop,
    text() {
      const all = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        all.set(c, at);
        at += c.length;
      }
      return new TextDecoder().decode(all).replace(/[^\x20-\x7e]+/g, " ").trim().slice(0, 300);
    },
  };
}

function processExists(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

/** `p`, or nothing once `ms` pass. */
async function deadline(p: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
