/**
 * Starting one agent runner: `bwrap <sandbox> -- deno run <the cotal-agent row> cmd/agent.ts`
 * (or, under `deno-only`, the same without bwrap), with an environment holding only the agent
 * allowlist and COTAL_LAUNCH, through a runtime (the pty by default).
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { AGENT_ENV_ALLOWLIST, denoRunFlags, type DeploymentLayout } from "../permissions.ts";
import type { LaunchSpec, Runtime, RuntimeHandle, SpawnOptions } from "../registry.ts";
import { type AgentSpec, declaredProgram, LAUNCH_ENV, launchFilePath } from "./launch.ts";
import { createRuntime } from "./pty_runtime.ts";
import { agentsRootOf, hiddenPaths, type Isolation, sandboxArgs } from "./sandbox/isolation.ts";

/** Everything needed to render one runner's command line. */
export interface RunnerOptions {
  readonly layout: DeploymentLayout;
  /** The agent's directory (absolute); the only place it may write. */
  readonly agentDir: string;
  /** The launch file; default `<agentDir>/launch.json`. Must be inside `agentDir`. */
  readonly launchFile?: string;
  /** The agent spec written to the launch file (for its declared program). */
  readonly spec: AgentSpec;
  /** From `resolveIsolation` / `chooseIsolation`. */
  readonly isolation: Isolation;
  /**
   * Values for the agent's environment; every name must be in the allowlist (or the layout's
   * `agentEnvPassThrough`). Default: those names copied from the supervisor's environment.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** Detach from the controlling terminal (default: only outside a pty, see sandboxArgs). */
  readonly newSession?: boolean;
  /** The deno binary (default `Deno.execPath()`). */
  readonly deno?: string;
  /** The runner entry point (default this checkout's cmd/agent.ts). */
  readonly entry?: string;
  /** deno.json, for the import map (default this checkout's). */
  readonly config?: string;
}

function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

function agentEnv(opts: RunnerOptions, launchFile: string): Record<string, string> {
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
  env[LAUNCH_ENV] = launchFile;
  return env;
}

/**
 * Renders the runner's launch spec: command, argv, the whole environment and the working dir.
 * Refuses a launch file outside the agent's dir and an agent dir inside supervisor state.
 */
export function runnerLaunchSpec(opts: RunnerOptions): LaunchSpec {
  const agentDir = opts.agentDir.replace(/\/+$/, "");
  const launchFile = opts.launchFile ?? launchFilePath(agentDir);
  if (!agentDir.startsWith("/") || !isInside(launchFile, agentDir) || launchFile === agentDir) {
    throw new CotalError(
      "runner_bad_paths",
      `The launch file ${launchFile} must be inside the absolute agent dir ${agentDir}; write it there.`,
    );
  }
  const l = opts.layout;
  const store = l.store ?? `${l.root}/secrets`;
  const forbidden = [
    store,
    l.signer ?? `${store}/auth`,
    l.runDir ?? `${l.root}/run`,
    l.logDir ?? `${l.root}/logs`,
    l.machineHome ?? `${Deno.env.get("HOME") ?? "/root"}/.cotal`,
  ];
  for (const dir of forbidden) {
    if (isInside(agentDir, dir.replace(/\/+$/, "")) || isInside(dir, agentDir)) {
      throw new CotalError(
        "runner_bad_paths",
        `The agent dir ${agentDir} overlaps ${dir}, which agents must not see; put agents under ${
          agentsRootOf(l)
        }.`,
      );
    }
  }
  const hide = hiddenPaths(l);
  const env = agentEnv(opts, launchFile);
  const program = declaredProgram(opts.spec);
  const config = opts.config ?? new URL("../../deno.json", import.meta.url).pathname;
  const entry = opts.entry ?? new URL("../../cmd/agent.ts", import.meta.url).pathname;
  const codeDirs = [...new Set([dirOf(config), dirOf(dirOf(entry))])];
  const denoArgs = [
    "run",
    ...denoRunFlags("cotal-agent", opts.layout, {
      agentDir,
      launchFile,
      program,
      envAllow: Object.keys(env),
    }),
    `--config=${config}`,
    entry,
  ];
  const deno = opts.deno ?? Deno.execPath();
  if (opts.isolation.mode === "deno-only") {
    return { command: deno, args: denoArgs, env, cwd: agentDir };
  }
  if (!opts.isolation.bwrap) {
    throw new CotalError(
      "sandbox_unavailable",
      "bwrap isolation was chosen without a bwrap binary; resolve the isolation with resolveIsolation().",
    );
  }
  return {
    command: opts.isolation.bwrap,
    args: [
      ...sandboxArgs({
        agentDir,
        hide,
        env,
        newSession: opts.newSession,
        expose: codeDirs,
        hideAll: hiddenPaths(l, { outermost: false }),
      }),
      deno,
      ...denoArgs,
    ],
    // bwrap itself gets the same minimal env: its pid-1 reaper's /proc/1/environ is visible
    // inside the sandbox, so anything given to bwrap would be readable by the agent.
    env,
    cwd: agentDir,
  };
}

/**
 * Creates the directories the sandbox hides when they do not exist yet (0700): a tmpfs needs
 * its mount point, and a secret dir created after the agent started would otherwise show
 * through the read-only view of `/`.
 */
export async function ensureHiddenDirs(layout: DeploymentLayout): Promise<void> {
  for (const dir of hiddenPaths(layout)) {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  }
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
 * sandbox also starts a new session, so the agent cannot reach the supervisor's terminal.
 */
export async function startRunner(
  opts: RunnerOptions & { readonly runtime?: Runtime } & SpawnOptions,
): Promise<StartedRunner> {
  const runtime = opts.runtime ?? await createRuntime("pty");
  await ensureHiddenDirs(opts.layout);
  const spec = runnerLaunchSpec({
    ...opts,
    newSession: opts.newSession ?? runtime.name !== "pty",
  });
  const handle = await runtime.spawn(spec, { cols: opts.cols, rows: opts.rows });
  return { handle, spec, isolation: opts.isolation, runtime: runtime.name };
}

function dirOf(path: string): string {
  return path.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";
}
