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
import { CotalEndpoint, startWaitingForBroker } from "../endpoint/mod.ts";
import {
  type AgentSpec,
  LAUNCH_ENV,
  type LaunchMaterial,
  readLaunchMaterial,
  RUNNER_PLACEHOLDERS,
} from "./launch.ts";
import { followControl } from "./sandbox/control_channel.ts";
import { cotalMcpServer } from "./mcp_command.ts";
import { forwardToRelay, RELAY_PORT } from "./sandbox/relay.ts";

/** What an agent is given: its launch material, its dir, a stop signal and its endpoint. */
export interface AgentContext {
  readonly launch: LaunchMaterial;
  /** The agent's working dir (its workdir when the operator declared one, else its home). */
  readonly agentDir: string;
  /** The read-only dir holding its launch material (and its module, for a module agent). */
  readonly launchDir: string;
  /** Aborted when the runner is asked to stop (the supervisor's control channel, SIGTERM). */
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

async function loadModule(launchDir: string, spec: AgentSpec & { kind: "module" }) {
  const file = `${launchDir}/${spec.module}`;
  let real: string;
  try {
    real = await Deno.realPath(file);
  } catch (err) {
    throw new CotalError(
      "agent_bad_module",
      `Cannot resolve the agent module ${spec.module} in ${launchDir} (${
        (err as Error).name
      }); put it inside the agent's directory.`,
    );
  }
  // A symlinked entry point would let Deno load (and quote in a parse error) a file outside.
  if (!isInside(real, await Deno.realPath(launchDir))) {
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

/**
 * A program's argument with the runner's own values in place of {@linkcode RUNNER_PLACEHOLDERS}
 * (the paths as the sandbox sees them), so a connector can point a harness at `cotal mcp`.
 */
function fillPlaceholders(arg: string): string {
  return arg
    .replaceAll(RUNNER_PLACEHOLDERS.launch, Deno.env.get(LAUNCH_ENV) ?? "")
    .replaceAll(RUNNER_PLACEHOLDERS.home, Deno.env.get("HOME") ?? "")
    .replaceAll(RUNNER_PLACEHOLDERS.denoDir, Deno.env.get("DENO_DIR") ?? "");
}

/** The command a program agent runs for the mesh: on its PATH, and named by `COTAL_MCP`. */
export const MCP_SHIM = "cotal-mcp";

/**
 * Writes `$HOME/.local/bin/cotal-mcp`, `cotal mcp` as this agent (its launch file, the sandbox's
 * paths), so a program in any language reaches the mesh by starting one command and speaking
 * MCP on its stdio; the directory it is in, or undefined when the agent has no home to write.
 */
async function writeMcpShim(): Promise<string | undefined> {
  const home = Deno.env.get("HOME");
  if (!home) return undefined;
  const dir = `${home}/.local/bin`;
  const q = (a: string) => `'${a.replaceAll("'", `'\\''`)}'`;
  const mcp = cotalMcpServer();
  const script = [
    "#!/bin/sh",
    "# cotal mcp as this agent: an MCP server on stdio (written by its runner).",
    ...Object.entries(mcp.env).map(([k, v]) => `export ${k}=${q(fillPlaceholders(v))}`),
    `exec ${[mcp.command, ...mcp.args.map(fillPlaceholders)].map(q).join(" ")} "$@"`,
    "",
  ].join("\n");
  try {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = `${dir}/.${MCP_SHIM}.${crypto.randomUUID()}`;
    await Deno.writeTextFile(tmp, script, { mode: 0o700, createNew: true });
    await Deno.rename(tmp, `${dir}/${MCP_SHIM}`);
    return dir;
  } catch {
    // A home it may not write (a custom layout): the program still runs, without the shim.
    return undefined;
  }
}

async function runProgram(
  agentDir: string,
  spec: AgentSpec & { kind: "program" },
  signal: AbortSignal,
): Promise<number> {
  let child: Deno.ChildProcess;
  const bin = await writeMcpShim();
  try {
    // The runner's env is already the supervisor's allowlist, so the child inherits only that.
    child = new Deno.Command(spec.command, {
      args: spec.args.map(fillPlaceholders),
      cwd: agentDir,
      ...(bin
        ? {
          env: {
            PATH: `${bin}:${Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin"}`,
            COTAL_MCP: `${bin}/${MCP_SHIM}`,
          },
        }
        : {}),
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
export function agentEndpoint(
  launchPath: string,
  launch: LaunchMaterial,
  opts: { consume?: boolean; channels?: readonly string[]; dedupeDurable?: boolean } = {},
): CotalEndpoint {
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
    ...(opts.consume === false ? { consume: false } : {}),
    ...(opts.channels?.length ? { channels: [...opts.channels] } : {}),
    ...(opts.dedupeDurable === false ? { dedupeDurable: false } : {}),
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
  const launchDir = dirOf(launchPath);
  const agentDir = launch.sandbox?.workdir ?? launch.sandbox?.home ?? launchDir;
  const stop = new AbortController();
  opts.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  if (opts.signal?.aborted) stop.abort();
  // The supervisor's line is up before any agent code runs: a stop can always reach us, and
  // the runner ends when the supervisor does.
  let unfollow = () => {};
  let unforward = () => {};
  if (launch.sandbox) {
    try {
      unfollow = await followControl(launch.sandbox.control, () => stop.abort());
    } catch (err) {
      throw new CotalError(
        "runner_control_unreachable",
        `Cannot reach the supervisor's control channel at ${launch.sandbox.control} (${
          (err as Error).name
        }); the runner is started by cotal-supervise.`,
      );
    }
    if (launch.sandbox.relay) unforward = forwardToRelay(launch.sandbox.relay, RELAY_PORT);
  }
  const unwatch = () => {
    unfollow();
    unforward();
  };
  const signal = stop.signal;
  const log = opts.log ?? ((line: string) => console.error(line));
  const spec = launch.agent;
  let ep: Promise<CotalEndpoint> | undefined;
  // A program's runner only keeps its presence: it binds none of the agent's consumers, which
  // it could not hand to the program. What reaches the agent waits in its durables (within
  // their caps) for the program's own reader, `cotal mcp`, instead of being refused by the
  // runner again and again while it holds the copies.
  const endpoint = () => {
    ep ??= (async () => {
      // A module or built-in joins at start the channels its spawn subscribed it to
      // (`--subscribe`): what comes before it adds its listener waits for it (the endpoint
      // holds it). A program's channels are joined by its own reader, `cotal mcp`.
      const e = agentEndpoint(launchPath, launch, {
        consume: spec.kind !== "program",
        channels: spec.kind === "program" ? [] : launch.channels ?? [],
      });
      e.addEventListener("warning", (ev) => log(`cotal-agent: ${ev.error.message}`));
      // An unreachable broker is waited for (an agent restarted while it was down stayed off
      // the mesh for good); a refused cred is the caller's to see.
      await startWaitingForBroker(e, {
        signal,
        waiting: (err) => log(`cotal-agent: ${err.message} Waiting for it.`),
        back: () => log("cotal-agent: on the mesh"),
      });
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
      ? await loadModule(launchDir, spec)
      : await loadBuiltin(spec.name);
    const code = await mod.run({ launch, agentDir, launchDir, signal, log, endpoint });
    return typeof code === "number" ? code : 0;
  } finally {
    unwatch();
    if (ep) await (await ep.catch(() => undefined))?.stop().catch(() => {});
  }
}
