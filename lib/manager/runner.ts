/**
 * The agent runner's library side: read the launch material, then run the agent it names, a
 * TypeScript module inside the agent's dir or a built-in agent in this process, or the declared
 * external program as a child (which inherits the runner's sandbox and its already-minimal env).
 * The runner connects to the broker as the agent: in-process agents ask for the endpoint, and
 * for an external program the runner holds it itself so the program shows in presence.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { CotalEndpoint } from "../endpoint/endpoint.ts";
import { type AgentSpec, LAUNCH_ENV, type LaunchMaterial, readLaunchMaterial } from "./launch.ts";

/** What an agent is given: its launch material, its dir, a stop signal and its endpoint. */
export interface AgentContext {
  readonly launch: LaunchMaterial;
  /** The agent's directory: its working dir and the only place it may write. */
  readonly agentDir: string;
  /** Aborted when the runner is asked to stop (SIGTERM, SIGINT). */
  readonly signal: AbortSignal;
  /** One line to the runner's stderr (what `cotal attach` and the logs show). */
  log(line: string): void;
  /**
   * The agent's broker endpoint (presence, DMs, anycast, channels), connected as the agent on
   * the first call; the runner stops it when the agent returns.
   */
  endpoint(): Promise<CotalEndpoint>;
}

/** What an agent module exports: `run` resolves to its exit code (default 0). */
export interface AgentModule {
  run(ctx: AgentContext): number | void | Promise<number | void>;
}

/** Built-in agents by name, loaded lazily so the runner only imports the one it runs. */
export const BUILTIN_AGENTS: Readonly<Record<string, () => Promise<AgentModule>>> = Object.freeze(
  {
    "task-runner": () => import("./agents/task_runner.ts"),
  },
);

/**
 * The stop file: the supervisor creates it in the agent's dir to ask the runner to stop (the
 * runner watches its dir). A signal cannot do this cleanly: under bwrap it would reach bwrap,
 * which takes the whole sandbox down before the runner leaves presence.
 */
export const STOP_FILE = ".cotal-stop";

/** Asks the runner of `agentDir` to stop; false when the dir is gone. */
export async function requestStop(agentDir: string): Promise<boolean> {
  try {
    await Deno.writeTextFile(`${agentDir}/${STOP_FILE}`, "", { mode: 0o600 });
    return true;
  } catch {
    return false;
  }
}

/** Removes a stale stop file before a (re)start. */
export async function clearStop(agentDir: string): Promise<void> {
  await Deno.remove(`${agentDir}/${STOP_FILE}`).catch(() => {});
}

/** Aborts `ctrl` when the stop file appears in `agentDir`; returns the watcher's closer. */
function watchStop(agentDir: string, ctrl: AbortController): () => void {
  let watcher: Deno.FsWatcher;
  try {
    watcher = Deno.watchFs(agentDir, { recursive: false });
  } catch {
    return () => {};
  }
  (async () => {
    try {
      for await (const ev of watcher) {
        if (ev.paths.some((p) => p.endsWith(`/${STOP_FILE}`))) ctrl.abort();
      }
    } catch {
      // Closed.
    }
  })();
  return () => watcher.close();
}

/** Options for {@linkcode runAgent}. */
export interface RunAgentOptions {
  /** Stops the agent (the CLI wires SIGTERM and SIGINT to it). */
  readonly signal?: AbortSignal;
  readonly log?: (line: string) => void;
}

/** The launch file's path from {@linkcode LAUNCH_ENV}; `launch_no_env` when unset. */
export function launchPathFromEnv(): string {
  const path = Deno.env.get(LAUNCH_ENV);
  if (!path || !path.startsWith("/")) {
    throw new CotalError(
      "launch_no_env",
      `${LAUNCH_ENV} is not set to an absolute path; cotal-agent is started by the supervisor, which sets it.`,
    );
  }
  return path;
}

function dirOf(path: string): string {
  return path.replace(/\/[^/]*$/, "") || "/";
}

function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

async function loadModule(agentDir: string, spec: AgentSpec & { kind: "module" }) {
  const file = `${agentDir}/${spec.module}`;
  let real: string;
  try {
    real = await Deno.realPath(file);
  } catch (err) {
    throw new CotalError(
      "agent_bad_module",
      `Cannot resolve the agent module ${spec.module} in ${agentDir} (${
        (err as Error).name
      }); put it inside the agent's directory.`,
    );
  }
  // A symlinked entry point would let Deno load (and quote in a parse error) a file outside.
  if (!isInside(real, await Deno.realPath(agentDir))) {
    throw new CotalError(
      "agent_bad_module",
      `The agent module ${spec.module} resolves outside the agent's directory; use a regular file inside it.`,
    );
  }
  const mod: Partial<AgentModule> = await import(`file://${real}`);
  if (typeof mod.run !== "function") {
    throw new CotalError(
      "agent_bad_module",
      `The agent module ${spec.module} exports no run(ctx) function; export one.`,
    );
  }
  return mod as AgentModule;
}

function loadBuiltin(name: string): Promise<AgentModule> {
  const load = BUILTIN_AGENTS[name];
  if (!load) {
    throw new CotalError(
      "agent_unknown_builtin",
      `No built-in agent is named ${JSON.stringify(name)} (known: ${
        Object.keys(BUILTIN_AGENTS).join(", ")
      }); check the agent spec.`,
    );
  }
  return load();
}

async function runProgram(
  agentDir: string,
  spec: AgentSpec & { kind: "program" },
  signal: AbortSignal,
): Promise<number> {
  let child: Deno.ChildProcess;
  try {
    // The runner's env is already the supervisor's allowlist, so the child inherits only that.
    child = new Deno.Command(spec.command, {
      args: [...spec.args],
      cwd: agentDir,
      stdin: "inherit",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
  } catch (err) {
    throw new CotalError(
      "agent_program_failed",
      `Could not start the agent's program ${spec.command} (${(err as Error).name}: ${
        (err as Error).message
      }); check the declared command.`,
    );
  }
  const stop = () => {
    try {
      child.kill("SIGTERM");
    } catch {
      // Already gone.
    }
  };
  signal.addEventListener("abort", stop, { once: true });
  try {
    const st = await child.status;
    return st.signal ? 128 + (signalNumber(st.signal) ?? 0) : st.code;
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

function signalNumber(sig: Deno.Signal): number | undefined {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[sig];
}

/**
 * The agent's endpoint. Its creds come from the launch file on every (re)read: the supervisor
 * re-mints them into it before the endpoint's 75 % renewal, so renewal needs no signer here.
 */
export function agentEndpoint(launchPath: string, launch: LaunchMaterial): CotalEndpoint {
  if (launch.auth.kind !== "creds") {
    throw new CotalError(
      "agent_bearer_unsupported",
      "This runner connects with creds only; give the agent static creds in its launch material.",
    );
  }
  const card = launch.card;
  return new CotalEndpoint({
    space: launch.space,
    servers: [...launch.servers],
    card: {
      name: card.name,
      owner: launch.principal.owner,
      actor: launch.principal.actor,
      ...(card.role ? { role: card.role } : {}),
      ...(card.description ? { description: card.description } : {}),
    },
    lifecycleUid: launch.lifecycleUid,
    creds: async () => {
      const now = await readLaunchMaterial(launchPath);
      if (now.auth.kind !== "creds") {
        throw new CotalError("agent_bearer_unsupported", "The launch file no longer holds creds.");
      }
      return now.auth.creds;
    },
  });
}

/**
 * Runs the agent a launch file names and resolves to the runner's exit code. Refusals (bad
 * material, unknown built-in, a module without `run`) throw CotalErrors; an agent that throws
 * rejects with its own error.
 */
export async function runAgent(launchPath: string, opts: RunAgentOptions = {}): Promise<number> {
  const launch = await readLaunchMaterial(launchPath);
  const agentDir = dirOf(launchPath);
  const stop = new AbortController();
  opts.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  if (opts.signal?.aborted) stop.abort();
  const unwatch = watchStop(agentDir, stop);
  const signal = stop.signal;
  const log = opts.log ?? ((line: string) => console.error(line));
  const spec = launch.agent;
  let ep: Promise<CotalEndpoint> | undefined;
  const endpoint = () => {
    ep ??= (async () => {
      const e = agentEndpoint(launchPath, launch);
      e.addEventListener("warning", (ev) => log(`cotal-agent: ${ev.error.message}`));
      await e.start();
      return e;
    })();
    return ep;
  };
  try {
    if (spec.kind === "program") {
      // The program may not speak NATS: the runner keeps its presence. A broker that cannot be
      // reached is reported, not fatal: the program is the agent's work.
      endpoint().catch((err) => log(`cotal-agent: not on the mesh: ${(err as Error).message}`));
      return await runProgram(agentDir, spec, signal);
    }
    const mod = spec.kind === "module"
      ? await loadModule(agentDir, spec)
      : await loadBuiltin(spec.name);
    const code = await mod.run({ launch, agentDir, signal, log, endpoint });
    return typeof code === "number" ? code : 0;
  } finally {
    unwatch();
    if (ep) await (await ep.catch(() => undefined))?.stop().catch(() => {});
  }
}
