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
  type BringBackReport,
  DAEMON_REMINT_INTERVAL_MS,
  type ManagerOptions,
  type ManagerStatus,
} from "./manager_types.ts";
export { type AgentRow, type AgentStatus } from "./managed_agent.ts";
export { type ManagerUserAuth } from "./agent_bearers.ts";
export { ManagerClient } from "./control_client.ts";
export { ensureBwrap, findBwrap } from "./sandbox/bwrap.ts";
export { ISOLATION_MODES, type IsolationMode } from "./sandbox/isolation.ts";
export { type AgentLimits, LIMIT_NAMES, parseLimitsFlag } from "./sandbox/limits.ts";
export { type AgentIdRange, DEFAULT_AGENT_IDS, parseIdRange } from "./sandbox/ids.ts";
export { type SandboxFacts } from "./sandbox/agent_sandbox.ts";
export { type NetMode } from "./sandbox/plan.ts";
export { readLaunchMaterial } from "./launch.ts";
export { createRuntime } from "./pty_runtime.ts";
export { agentEndpoint, launchPathFromEnv, runAgent } from "./runner.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { agentSocketDir } from "./agent_setup.ts";
export type { JsonObject } from "./control_rail.ts";
export type { DespawnResult } from "./fleet.ts";
export { findConnector } from "./connectors.ts";
export { HARNESS_INSTALL } from "./harness_connectors.ts";
export { managerInstanceId } from "./manager_types.ts";
export { limitBoundsText } from "./sandbox/limits.ts";
export { askSpawnChannel, PERSONA_NAME } from "./sandbox/spawn_channel.ts";
export type { SpawnChannelRequest } from "./sandbox/spawn_channel.ts";
export { isReservedAgentName } from "./spawn_request.ts";
