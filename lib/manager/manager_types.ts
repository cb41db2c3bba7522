/**
 * The Manager's options, its status answer, and the schedule and size constants it runs by.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { AGENT_SLOTS, type DeploymentLayout } from "../permissions.ts";
import type { SecretStore } from "../workspace/mod.ts";
import type { IsolationMode } from "./sandbox/isolation.ts";
import type { AgentIdRange } from "./sandbox/ids.ts";
import type { AgentLimits } from "./sandbox/limits.ts";
import type { ManagerUserAuth } from "./agent_bearers.ts";

/** Creds a manager re-signs for its daemons are checked this often (TTL/4 of 24 h). */
export const DAEMON_REMINT_INTERVAL_MS = 6 * 60 * 60 * 1000;
/**
 * Agent creds are re-minted into the launch file at half their life, so the runner's own 75 %
 * re-read always finds the fresh one (an unchanged cred at 75 % would be a failed renewal).
 */
export const AGENT_REMINT_FRACTION = 0.5;
/**
 * An agent's cred lifetime unless the manager is told otherwise: short, because despawn cannot
 * revoke a cred an agent copied out (it is re-minted into the launch file at half life).
 */
export const DEFAULT_AGENT_CREDS_TTL_SECONDS = 3600;

/** Agents one manager runs at most (one socket slot each). */
export const MAX_AGENTS: number = AGENT_SLOTS;

/** A manager's stable id per (workspace root, space): its lease, index and socket dir. */
export function managerInstanceId(root: string, space: string): string {
  return createHash("sha256").update(`${root.replace(/\/+$/, "")}\0${space}`).digest("hex")
    .slice(0, 16);
}

/** A start's bring-back of the agents a `down --keep-agents` kept. */
export interface BringBackReport {
  /** Whether it has finished (or there was nothing to bring back). */
  readonly done: boolean;
  /** Agents still waiting to come back. */
  readonly pending: readonly string[];
  /** Agents back under their lifecycle. */
  readonly back: readonly string[];
  /** Agents that could not come back (removed), and why. */
  readonly failed: readonly { readonly name: string; readonly reason: string }[];
}

/** Options of {@linkcode Manager}. */
export interface ManagerOptions {
  /** The space this manager serves. */
  readonly space: string;
  /** Broker URL(s); default `nats://127.0.0.1:4222`. */
  readonly servers?: string | readonly string[];
  /** The state directory (`.cotal`): agents' dirs live in `<root>/agents`. */
  readonly workspaceRoot: string;
  /**
   * The one store every secret goes through: the signer records, the daemon creds it re-signs
   * (pass the delivery daemon the same store) and per-agent creds. Default: the workspace store.
   */
  readonly secretStore?: SecretStore;
  /**
   * Where credentials are signed: `"local"` (default: this process loads the space's signer
   * records from the store) or `"remote"`: the space's `cotal-signer` signs each one, this
   * manager never loads a seed, and starts from its own cred under `supervisorCredsKey` (which
   * `cotal up` writes: a `supervisor` profile cred, its principal the manager's own). Remote
   * managers do not re-sign daemon creds: `cotal-signer` does; an embedder running
   * {@linkcode runSigner} in-process schedules `remintDaemonCreds(root, space, store, { also:
   * [SUPERVISOR_CRED] })` itself, again after `nextResignDelayMs(results, ...)`.
   */
  readonly signer?: "local" | "remote";
  /**
   * User mode: the space's auth service (`cotal-auth-service`) grants each agent a ledger row
   * and issues its bearers, which the manager keeps in memory and its relay presents at each
   * connect (the auth callout admits the agent). No agent cred is minted or written. Absent:
   * what the root asks for (its user-auth marker, `cotal up --user-auth`: the space's running
   * auth service, or a refusal to start without one; no marker: static creds the manager
   * mints). `false`: static creds whatever the root says.
   */
  readonly userAuth?: ManagerUserAuth | false;
  /** `bwrap` (default) or `deno-only` (the operator's explicit opt-in). */
  readonly isolation?: IsolationMode;
  /**
   * The bwrap binary; default: found through `COTAL_BWRAP`, `PATH`, then the project cache. A
   * path that does not pass the probe sandbox means no bwrap (untrusted agents are refused).
   */
  readonly bwrap?: string;
  /** The spawn backend, resolved through the registry; default `pty`. */
  readonly runtime?: string;
  /** Layout overrides (store, signer and machine home paths; agent env pass-through). */
  readonly layout?: Partial<Omit<DeploymentLayout, "root" | "broker">>;
  /** Agent cred lifetime in seconds (default `DEFAULT_AGENT_CREDS_TTL_SECONDS`; at most the agent profile's maximum). */
  readonly agentCredsTtlSeconds?: number;
  /**
   * Agents one agent may run at once through its spawn channel (default
   * `DEFAULT_MAX_CHILDREN`, at most `MAX_CHILDREN_CAP`; nothing an agent sends changes it).
   */
  readonly maxChildrenPerAgent?: number;
  /** This space's limits for its agents, over the frozen defaults and within their bounds. */
  readonly agentLimits?: Partial<AgentLimits>;
  /** The uids a root supervisor gives its agents (default `DEFAULT_AGENT_IDS`). */
  readonly agentIds?: AgentIdRange;
  /** Where agent uids are locked (default `/run/cotal/agent-ids`, machine-wide). */
  readonly idLockDir?: string;
  /**
   * start() waits for a broker that is not up yet, however long (the supervisor daemon does);
   * default false: an embedder's start() fails at once with `broker_connect_failed`.
   */
  readonly waitForBroker?: boolean;
  /** How long start() waits for a crashed predecessor's lease to lapse; default TTL + 2 s. */
  readonly leaseWaitMs?: number;
  /** One line per event; default stderr. */
  readonly log?: (line: string) => void;
}

/** What `status` answers. */
export interface ManagerStatus {
  /** The control rail's version. */
  readonly version: number;
  /** The space supervised. */
  readonly space: string;
  /** Stable per root and space. */
  readonly instanceId: string;
  /** Per process. */
  readonly epoch: string;
  /** Its pid. */
  readonly pid: number;
  /** Its state directory. */
  readonly root: string;
  /** Its spawn backend. */
  readonly runtime: string;
  /** The isolation in force, in words. */
  readonly isolation: string;
  /** Where its credentials are signed: `local` (it holds the seeds) or `remote` (cotal-signer). */
  readonly signing?: "local" | "remote";
  /** How its agents are admitted: `creds` it mints, or `user`: bearers of the auth service. */
  readonly agentAuth?: "creds" | "user";
  /** Agents it runs. */
  readonly agents: number;
  /** Attach sessions open. */
  readonly sessions: number;
  /** How long it has run. */
  readonly uptimeMs: number;
  /** The bring-back of agents a `down --keep-agents` kept: pending, back, failed and why. */
  readonly bringBack?: BringBackReport;
}
