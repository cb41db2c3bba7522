/**
 * lib/manager: the supervisor (`Manager`) and its building blocks: the control rail and its
 * client, runtimes (pty built in), the agent sandbox (an allowlist bwrap root, uids, limits,
 * seccomp, the broker relay) and isolation modes, agents' launch
 * material, the built-in connectors, and starting one agent runner. Importing it registers the
 * `runtime:pty` and `runtime:process` runtimes and the `task-runner`, `module` and `program`
 * connectors.
 *
 * @example
 * ```ts
 * const manager = new Manager({ space, servers: brokerUrl, workspaceRoot });
 * await manager.start(); // then wire your own SIGINT/SIGTERM -> manager.stop()
 * const ctl = await ManagerClient.connect({ servers: brokerUrl, space, creds: controlCreds });
 * await ctl.request("spawn", { name: "upper", role: "shout", command: "/usr/bin/tr", args: ["a-z", "A-Z"] });
 * ```
 *
 * @module
 */
export { Manager } from "./manager.ts";
export {
  AGENT_REMINT_FRACTION,
  type BringBackReport,
  DAEMON_REMINT_INTERVAL_MS,
  type ManagerOptions,
  type ManagerStatus,
  MAX_AGENTS,
} from "./manager_types.ts";
export {
  type AgentRow,
  type AgentStatus,
  OUTPUT_TAIL_BYTES,
  type RestartPolicy,
  STOP_GRACE_MS,
} from "./managed_agent.ts";
export {
  DEFAULT_RESTART_POLICY,
  parseSpawnRequest,
  READINESS_TIMEOUT_MS,
  type SpawnRequest,
} from "./spawn_request.ts";
export {
  CONTROL_VERSION,
  type ControlCaller,
  type ControlReply,
  type ControlRequest,
  MANAGER_COMMANDS,
  MANAGER_ENDPOINT,
  type ManagerCommand,
  parseRequestSubject,
  replySubject,
  requestSubject,
  sessionSubject,
} from "./control_rail.ts";
export {
  type AttachSession,
  DEFAULT_CONTROL_TIMEOUT_MS,
  ManagerClient,
  type ManagerClientOptions,
  READ_RESEND_MS,
} from "./control_client.ts";
export { MANAGER_LEASE_RENEW_MS, MANAGER_LEASE_TTL_MS } from "./lease.ts";
export { MAX_SESSIONS } from "./attach.ts";
export {
  agentSpecFromLaunch,
  type ManagerLaunchContext,
  moduleConnector,
  programConnector,
  RUNNER_COMMAND,
  taskRunnerConnector,
} from "./connectors.ts";
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
} from "./sandbox/bwrap.ts";
export {
  agentDirOf,
  agentsRootOf,
  chooseIsolation,
  type HostIsolation,
  type Isolation,
  ISOLATION_MODES,
  type IsolationFacts,
  type IsolationMode,
  type IsolationRequest,
  probeIsolation,
  probeSandbox,
  protectedPaths,
  resolveIsolation,
  type ResolveIsolationOptions,
  type SandboxProbeOptions,
} from "./sandbox/isolation.ts";
export {
  AGENT_LIMIT_BOUNDS,
  type AgentLimits,
  DEFAULT_AGENT_LIMITS,
  LIMIT_NAMES,
  parseLimits,
  parseLimitsFlag,
} from "./sandbox/limits.ts";
export {
  type AgentIdRange,
  DEFAULT_AGENT_IDS,
  DEFAULT_ID_LOCK_DIR,
  parseIdRange,
} from "./sandbox/ids.ts";
export { type SandboxFacts } from "./sandbox/agent_sandbox.ts";
export { type NetMode } from "./sandbox/plan.ts";
export { seccompFilter } from "./sandbox/seccomp.ts";
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
  agentEndpoint,
  type AgentModule,
  BUILTIN_AGENTS,
  launchPathFromEnv,
  runAgent,
  type RunAgentOptions,
} from "./runner.ts";
export {
  denoDir,
  runnerLaunchSpec,
  type RunnerOptions,
  type RunnerSandbox,
  type StartedRunner,
  startRunner,
} from "./start_runner.ts";
export {
  parseTaskRunnerConfig,
  resultRecipient,
  runTaskCommand,
  TASK_RUNNER_LIMITS,
  type TaskCommand,
  type TaskResult,
  type TaskRunnerConfig,
} from "./agents/task_runner.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { agentSocketDir } from "./agent_setup.ts";
export type { JsonObject } from "./control_rail.ts";
export type { DespawnResult } from "./fleet.ts";
export { HARNESS_INSTALL } from "./harness_connectors.ts";
export { managerInstanceId } from "./manager_types.ts";
export { limitBoundsText } from "./sandbox/limits.ts";
export { askSpawnChannel, PERSONA_NAME } from "./sandbox/spawn_channel.ts";
export type { SpawnChannelRequest } from "./sandbox/spawn_channel.ts";
export { isReservedAgentName } from "./spawn_request.ts";
