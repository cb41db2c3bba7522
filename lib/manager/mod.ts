/**
 * lib/manager: the supervisor's building blocks: runtimes (pty built in), the bwrap sandbox and
 * isolation modes, agents' launch material, and starting one agent runner. Importing it
 * registers the `runtime:pty` and `runtime:process` extensions.
 *
 * @example
 * ```ts
 * const isolation = await resolveIsolation({ program: declaredProgram(spec) });
 * await writeLaunchMaterial(launchFilePath(agentDir), material);
 * const { handle } = await startRunner({ layout, agentDir, spec, isolation });
 * handle.onExit((e) => console.log("agent exited", e));
 * ```
 *
 * @module
 */
export {
  BWRAP_MANUAL,
  bwrapSuites,
  cachedBwrapPath,
  ensureBwrap,
  type EnsureBwrapOptions,
  findBwrap,
  type FoundBwrap,
  installBwrap,
  probeBwrap,
} from "./bwrap.ts";
export {
  agentsRootOf,
  chooseIsolation,
  hiddenPaths,
  type Isolation,
  ISOLATION_MODES,
  type IsolationFacts,
  type IsolationMode,
  type IsolationRequest,
  resolveIsolation,
  sandboxArgs,
  type SandboxOptions,
} from "./sandbox.ts";
export {
  type AgentAuth,
  type AgentCard,
  type AgentSpec,
  declaredProgram,
  LAUNCH_ENV,
  LAUNCH_FORMAT,
  launchFilePath,
  type LaunchMaterial,
  MAX_LAUNCH_BYTES,
  parseLaunchMaterial,
  readLaunchMaterial,
  writeLaunchMaterial,
} from "./launch.ts";
export { createRuntime, DEFAULT_PTY_SIZE, processRuntime, ptyRuntime } from "./pty_runtime.ts";
export {
  type AgentContext,
  type AgentModule,
  BUILTIN_AGENTS,
  launchPathFromEnv,
  runAgent,
  type RunAgentOptions,
} from "./runner.ts";
export {
  ensureHiddenDirs,
  runnerLaunchSpec,
  type RunnerOptions,
  type StartedRunner,
  startRunner,
} from "./start_runner.ts";
export {
  parseTaskRunnerConfig,
  runTaskCommand,
  TASK_RUNNER_LIMITS,
  type TaskCommand,
  type TaskResult,
  type TaskRunnerConfig,
} from "./agents/task_runner.ts";
