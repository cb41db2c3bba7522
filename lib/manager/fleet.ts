/**
 * The agents one supervisor runs: spawning (one plan at a time, then the sandbox, creds,
 * runner and readiness), despawning with what each spawned, keeping them for a later start and
 * bringing them back, restarts on exit, and the roster index. The `Manager` owns the broker
 * connection, the lease and the control rail, and hands this its context through
 * {@linkcode FleetHost}.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalEndpoint, Presence } from "../endpoint/mod.ts";
import type { DeploymentLayout } from "../permissions.ts";
import type { Runtime, RuntimeExit } from "../registry.ts";
import { errorText, lifecycleTag } from "../wire/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { prepareAgent, runnerSandbox } from "./agent_setup.ts";
import { scheduleAgentRenewal } from "./agent_renewal.ts";
import { findConnector } from "./connectors.ts";
import type { JsonObject } from "./control_rail.ts";
import { childrenOf, delegatedSpawnHandler, maxChildren, SpawnRate } from "./delegated_spawn.ts";
import type { HostSandbox } from "./host_sandbox.ts";
import {
  agentCredsKey,
  type IndexedAgent,
  type LifecycleContext,
  removeAgentDir,
  teardownFootprint,
  writeIndex,
} from "./lifecycle.ts";
import { type AgentRow, ManagedAgent } from "./managed_agent.ts";
import {
  type BringBackReport,
  DEFAULT_AGENT_CREDS_TTL_SECONDS,
  type ManagerOptions,
  MAX_AGENTS,
} from "./manager_types.ts";
import { awaitPresence } from "./readiness.ts";
import { onRunnerExit } from "./restarts.ts";
import { isPresent, presenceHolds, rosterRow, rosterRows } from "./roster.ts";
import { type OtherAgentBinds, planSpawn } from "./spawn_plan.ts";
import * as requests from "./fleet_requests.ts";
export type { DespawnResult } from "./fleet_requests.ts";
import { assertProgram, parseSpawnRequest, type SpawnRequest } from "./spawn_request.ts";
import { RUNNER_HUNG_AFTER_MS } from "./sandbox/control_channel.ts";
import { signalGroup, signalProcess } from "./sandbox/libc.ts";
import { startRunner } from "./start_runner.ts";

/** What the fleet needs of its manager (read when used: most of it exists only once started). */
export interface FleetHost {
  readonly ctx: LifecycleContext;
  readonly opts: ManagerOptions;
  readonly instanceId: string;
  readonly servers: string[];
  readonly socketDir: string;
  readonly layout: DeploymentLayout;
  readonly store: SecretStore;
  readonly sandbox?: HostSandbox;
  readonly runtime?: Runtime;
  /** The supervisor's own endpoint: presence is read through it. */
  readonly endpoint?: CotalEndpoint;
  /** Aborted when the manager stops (a readiness wait ends with it). */
  readonly stopping: AbortSignal;
  /** Set by a stop that keeps agents. */
  readonly keepAgents: boolean;
  running(): boolean;
  track<T>(p: Promise<T>): Promise<T>;
  log(line: string): void;
}

/** One supervisor's agents, running and kept. */
export class Fleet {
  readonly #host: FleetHost;
  readonly #agents = new Map<string, ManagedAgent>();
  /**
   * Roster rows kept without a running agent: lifecycles to bring back (read at start, or
   * left by a stop that keeps agents). They stay in the index until they run again.
   */
  readonly #kept = new Map<string, IndexedAgent>();
  #bringBackDone = true;
  readonly #broughtBack: string[] = [];
  readonly #failedBack: { name: string; reason: string }[] = [];
  /** Tags of lifecycles this manager ended: a stale presence row of theirs holds no name. */
  readonly #ended = new Set<string>();
  /** Names whose principal has a live lifecycle this supervisor does not run. */
  readonly #foreign = new Set<string>();
  /** Each spawning parent's rate, by lifecycle (kept across its restarts). */
  readonly #spawnRates = new Map<string, SpawnRate>();
  /** Spawns plan one at a time: a name is taken before the next is chosen. */
  #planning: Promise<unknown> = Promise.resolve();
  /** Lifecycles whose spawn completed (online): only they may ask for agents of their own. */
  readonly #online = new Set<string>();

  constructor(host: FleetHost) {
    this.#host = host;
  }

  /** How many agents run (kept ones not counted). */
  get size(): number {
    return this.#agents.size;
  }

  /** The names of the kept rows waiting to come back. */
  keptNames(): string[] {
    return [...this.#kept.keys()];
  }

  /** What this start's bring-back has done so far (what `cotal up` reports). */
  bringBackReport(): BringBackReport {
    return {
      done: this.#bringBackDone,
      pending: this.keptNames(),
      back: [...this.#broughtBack],
      failed: this.#failedBack.map((f) => ({ ...f })),
    };
  }

  /** Takes rows a predecessor left, to bring back. */
  adoptKept(rows: readonly IndexedAgent[]): void {
    for (const a of rows) this.#kept.set(a.name, a);
  }

  /** One running agent, or `not_found` naming where to look. */
  get(name: string): ManagedAgent {
    const a = this.#agents.get(name);
    if (!a) {
      throw new CotalError(
        "not_found",
        `No agent named ${
          JSON.stringify(name)
        } is managed in space '${this.#host.ctx.space}'; see 'cotal ps --space ${this.#host.ctx.space}'.`,
      );
    }
    return a;
  }

  #roster(): Presence[] {
    try {
      return this.#host.endpoint?.getRoster() ?? [];
    } catch {
      return [];
    }
  }

  #present(id: string, uid?: string): boolean {
    return isPresent(this.#roster(), id, uid);
  }

  /** Every managed agent, with its presence fact. */
  ps(): AgentRow[] {
    return [...this.#agents.values()].map((a) => a.row(this.#present(a.id, a.plan.lifecycleUid)))
      .sort((x, y) => x.name < y.name ? -1 : 1);
  }

  /** Writes the roster index (running and kept rows). */
  saveIndex(): Promise<void> {
    return writeIndex(
      this.#host.ctx,
      this.#host.instanceId,
      rosterRows(this.#agents, this.#kept),
    );
  }

  /** Spawns the kept roster again, one by one; one that cannot come back is torn down. */
  async bringBack(): Promise<void> {
    this.#bringBackDone = false;
    try {
      await this.#bringBackAll();
    } finally {
      this.#bringBackDone = true;
    }
  }

  async #bringBackAll(): Promise<void> {
    for (const row of [...this.#kept.values()]) {
      if (!this.#host.running()) return;
      // Despawned meanwhile (by the operator, or with a parent that could not come back).
      if (!this.#kept.has(row.name)) continue;
      try {
        // Under its own name: a fresh one could be another kept agent's, not back yet.
        await this.spawn({ ...row.request!, name: row.name }, {
          lifecycleUid: row.lifecycleUid,
          ...(row.uid !== undefined ? { uid: row.uid } : {}),
          ...(row.requestId !== undefined ? { requestId: row.requestId } : {}),
        });
        this.#host.log(`manager: brought ${row.name} back (same lifecycle)`);
        this.#broughtBack.push(row.name);
      } catch (err) {
        if (!this.#host.running()) return;
        this.#host.log(`manager: could not bring ${row.name} back (${errorText(err)}); removed it`);
        this.#failedBack.push({ name: row.name, reason: errorText(err) });
        this.#kept.delete(row.name);
        await teardownFootprint(this.#host.ctx, row);
        await this.#endChildren(row.lifecycleUid);
        await this.saveIndex().catch(() => {});
      }
    }
    this.#host.log("manager: bring-back done");
  }

  /** The agent an earlier copy of spawn request `requestId` made (see `spawnedFor`). */
  #spawnedFor(requestId: string): Promise<AgentRow | undefined> {
    return requests.spawnedFor(requestId, {
      agents: () => this.#agents.values(),
      kept: () => this.#kept.values(),
      failedBack: () => this.#failedBack,
      present: (a) => this.#present(a.id, a.plan.lifecycleUid),
    });
  }

  /** What every other agent here has bound (see `othersBinds`). */
  #othersBinds(except?: string): OtherAgentBinds[] {
    return requests.othersBinds(this.#agents, this.#kept, except);
  }

  /** Whether the lifecycle `uid` runs or waits to come back. */
  #alive(uid: string): boolean {
    return [...this.#agents.values()].some((a) => a.plan.lifecycleUid === uid) ||
      [...this.#kept.values()].some((r) => r.lifecycleUid === uid);
  }

  /**
   * Stops every agent: kept on the roster (`keep`), or despawned with the kept rows torn down.
   * `index` writes the roster after a despawn of all (false when no signer ever came up).
   */
  async stopAll(keep: boolean, index: boolean): Promise<void> {
    if (keep) {
      await Promise.allSettled([...this.#agents.values()].map((a) => this.keep(a)));
      return;
    }
    await Promise.allSettled([...this.#agents.keys()].map((n) => this.despawn(n)));
    for (const row of [...this.#kept.values()]) {
      await teardownFootprint(this.#host.ctx, row);
      this.#kept.delete(row.name);
    }
    if (index) await this.saveIndex().catch(() => {});
  }

  /**
   * Spawns one agent and resolves once its presence appears (the readiness window), or
   * refuses with a typed error after undoing everything it provisioned.
   */
  async spawn(
    rawArgs: JsonObject,
    resume?: { lifecycleUid: string; uid?: number; requestId?: string },
    requestId?: string,
  ): Promise<AgentRow> {
    if (requestId !== undefined && !resume) {
      const earlier = await this.#spawnedFor(requestId);
      if (earlier) return earlier;
    }
    const req = parseSpawnRequest(rawArgs);
    if (req.command) await assertProgram(req.command);
    const connector = findConnector(req.agent);
    // A kept lifecycle's own stale presence row does not hold its name. Names that differ only
    // by case are one name (`Prog` and `prog` read as one agent to anyone but the broker).
    const names = () => [...this.#agents.keys(), ...(resume ? [] : this.#kept.keys())];
    const taken = (n: string) =>
      names().some((k) => k.toLowerCase() === n.toLowerCase()) ||
      (req.name === undefined && this.#foreign.has(n)) ||
      presenceHolds(this.#roster(), n, this.#ended, resume?.lifecycleUid);
    if (req.role !== undefined && !resume) requests.assertRoleCase(req.role, this.#agents.values());
    // One plan at a time, its name held before the next is chosen (two spawns of one role at
    // once took the same name, and one's cleanup removed the other's dir).
    const planned = this.#planning.then(() => {
      if (this.#agents.size >= MAX_AGENTS) {
        throw new CotalError(
          "resource_exhausted",
          `This manager runs ${MAX_AGENTS} agents already; despawn one first.`,
        );
      }
      return planSpawn({
        req,
        connector,
        ctx: this.#host.ctx,
        taken,
        isolationMode: this.#host.opts.isolation ?? "bwrap",
        isolate: (r) => Promise.resolve(this.#host.sandbox!.isolate(r)),
        credsKey: (name, uid) => agentCredsKey(this.#host.ctx, name, uid),
        spaceLimits: this.#host.opts.agentLimits,
        others: this.#othersBinds(resume ? req.name : undefined),
        ...(resume ? { lifecycleUid: resume.lifecycleUid } : {}),
      }).then((plan) => {
        // A child whose parent ended while its spawn waited would outlive it.
        if (req.spawnedBy && !this.#alive(req.spawnedBy)) {
          throw new CotalError(
            "spawn_parent_gone",
            `The agent that asked for ${plan.name} has ended; nothing was spawned.`,
          );
        }
        const agent = new ManagedAgent(plan);
        agent.request = rawArgs;
        agent.requestId = resume?.requestId ?? requestId;
        this.#agents.set(plan.name, agent);
        return agent;
      });
    });
    this.#planning = planned.catch(() => {});
    const agent = await planned;
    const plan = agent.plan;
    // Taken before any await, so two spawns in flight never share a socket slot.
    agent.slot = requests.freeSlot(this.#agents.values(), agent);
    const ttl = this.#host.opts.agentCredsTtlSeconds ?? DEFAULT_AGENT_CREDS_TTL_SECONDS;
    try {
      // On the roster before anything is provisioned: a supervisor killed while it provisions
      // leaves a lifecycle on the broker that its successor must know of, or the name stays
      // held by no one (fault pass 12).
      await this.saveIndex();
      await prepareAgent(this.#host.ctx, agent, {
        servers: this.#host.servers,
        slot: agent.slot!,
        socketDir: this.#host.socketDir,
        ...(this.#host.sandbox?.idPool ? { idPool: this.#host.sandbox.idPool } : {}),
        ...(resume?.uid !== undefined ? { preferUid: resume.uid } : {}),
        ...(req.module ? { moduleSource: req.module } : {}),
        subscribe: req.subscribe,
        ttlSeconds: ttl,
        description: req.description,
        ...(req.spawnable ? { spawn: this.#spawnRights(plan, req.spawnable) } : {}),
      });
      await this.saveIndex();
      await this.#startRunner(agent);
      await this.saveIndex();
      const present = () => this.#present(agent.id, agent.plan.lifecycleUid);
      await awaitPresence(
        agent,
        this.#host.endpoint!,
        present,
        req.readinessMs,
        this.#host.stopping,
      );
      this.#scheduleAgentRenewal(agent, ttl);
      this.#kept.delete(plan.name);
      this.#online.add(plan.lifecycleUid);
      this.#host.log(`manager: spawned ${plan.name} (${plan.connector}, pid ${agent.handle?.pid})`);
      return agent.row(true);
    } catch (err) {
      await agent.halt("spawn-failed");
      // A kept lifecycle interrupted by a stop that keeps agents stays on the roster.
      if (resume && this.#host.keepAgents) await removeAgentDir(plan.agentDir);
      else await teardownFootprint(this.#host.ctx, plan);
      this.#agents.delete(plan.name);
      // What it asked for before it failed ends with it (a kept lifecycle keeps its own).
      if (!(resume && this.#host.keepAgents)) await this.#endChildren(plan.lifecycleUid);
      await this.saveIndex().catch(() => {});
      const foreign = resume ? undefined : requests.heldElsewhere(err, plan.name);
      if (!foreign) throw err;
      // A chosen name held elsewhere: the next one (a few at most, each a refused provision).
      this.#foreign.add(plan.name);
      if (req.name !== undefined || this.#foreign.size > 16) throw foreign;
      return await this.spawn(rawArgs, resume, requestId);
    }
  }

  /** What `parent` may ask on its spawn channel: one of its personas, through `spawn()`. */
  #spawnRights(
    parent: { name: string; lifecycleUid: string },
    templates: NonNullable<SpawnRequest["spawnable"]>,
  ) {
    const uid = parent.lifecycleUid;
    let rate = this.#spawnRates.get(uid);
    if (!rate) this.#spawnRates.set(uid, rate = new SpawnRate());
    const handler = delegatedSpawnHandler(parent, templates, maxChildren(this.#host.opts), {
      spawn: (a) => this.#host.track(this.spawn(a)),
      despawn: (n) => this.despawn(n),
      children: () =>
        this.#childrenOf(uid).flatMap((n) => {
          const a = this.#agents.get(n);
          return a ? [a.row(this.#present(a.id, a.plan.lifecycleUid))] : [];
        }),
      count: () => this.#childrenOf(uid).length,
      ready: () => this.#online.has(uid),
      rate,
      log: this.#host.log,
    });
    return { personas: Object.keys(templates), handler };
  }

  /** The agents (running or kept) the lifecycle `parentUid` spawned. */
  #childrenOf(parentUid: string): string[] {
    return childrenOf([
      ...[...this.#agents.values()].map((a) => ({ name: a.plan.name, request: a.request })),
      ...this.#kept.values(),
    ], parentUid);
  }

  /** Despawns what the lifecycle `parentUid` spawned: its children end with it. */
  async #endChildren(parentUid: string): Promise<string[]> {
    this.#spawnRates.delete(parentUid);
    this.#online.delete(parentUid);
    const children = this.#childrenOf(parentUid);
    await Promise.allSettled(children.map((c) => this.despawn(c)));
    return children;
  }

  async #startRunner(agent: ManagedAgent): Promise<void> {
    const p = agent.plan;
    const started = await startRunner({
      layout: this.#host.layout,
      agentDir: p.agentDir,
      spec: p.spec,
      isolation: p.isolation,
      sandbox: runnerSandbox(agent),
      runtime: this.#host.runtime,
      cols: agent.cols,
      rows: agent.rows,
      ...(p.env ? { extraEnv: p.env } : {}),
      onRetry: (why) =>
        this.#host.log(`manager: ${p.name}'s sandbox did not start (${why}); trying once more`),
    });
    agent.hung = undefined;
    agent.attachHandle(started.handle, (exit) => this.#onExit(agent, exit));
    agent.sandbox?.control.onSilent(() => this.#killHung(agent));
  }

  /**
   * A runner that stopped answering its control line is killed, so the restart policy treats it
   * as the crash it is (a frozen runner would otherwise sit "running", gone from the mesh).
   */
  #killHung(agent: ManagedAgent): void {
    const h = agent.handle;
    if (!h || (agent.status !== "running" && agent.status !== "starting")) return;
    agent.hung = `its runner stopped answering (no reply on its control line for ${
      Math.round(RUNNER_HUNG_AFTER_MS / 1000)
    } s)`;
    this.#host.log(`manager: ${agent.plan.name}: ${agent.hung}; killing it`);
    signalProcess(h.pid, "SIGKILL");
    signalGroup(h.pid, "SIGKILL");
  }

  #scheduleAgentRenewal(agent: ManagedAgent, ttlSeconds?: number): void {
    // In user mode the agent has no cred to renew: its bearers are (agent_bearers.ts).
    if (this.#host.ctx.bearers) return;
    scheduleAgentRenewal(agent, {
      ctx: this.#host.ctx,
      store: this.#host.store,
      servers: this.#host.servers,
      ttlSeconds,
      log: this.#host.log,
    });
  }

  #onExit(agent: ManagedAgent, exit: RuntimeExit): void {
    onRunnerExit(agent, exit, {
      running: () => this.#host.running(),
      startRunner: (a) => this.#startRunner(a),
      teardown: async (a) => {
        await teardownFootprint(this.#host.ctx, a.plan);
        // A parent retired by its crash budget ends what it spawned.
        await this.#endChildren(a.plan.lifecycleUid);
      },
      saveIndex: () => this.saveIndex(),
      track: (p) => this.#host.track(p),
      log: this.#host.log,
    });
  }

  /** Stops one agent for a later start to bring back: its roster row, lifecycle and durables stay. */
  async keep(a: ManagedAgent): Promise<void> {
    if (a.status === "retired" || !a.request) return void await this.despawn(a.plan.name);
    await a.halt("manager-stop");
    await removeAgentDir(a.plan.agentDir);
    const { pid: _pid, ...row } = rosterRow(a);
    this.#kept.set(a.plan.name, row);
    this.#agents.delete(a.plan.name);
    await this.saveIndex().catch(() => {});
    this.#host.log(`manager: stopped ${a.plan.name} (kept on the roster)`);
  }

  /**
   * Stops one agent and removes its footprint (durables, ACL row, creds, dir), and the agents it
   * spawned (named in `childrenEnded`).
   */
  async despawn(name: string): Promise<requests.DespawnResult> {
    const kept = this.#kept.get(name);
    this.#kept.delete(name);
    if (kept && !this.#agents.has(name)) {
      // On the roster, not running (yet): its lifecycle ends here.
      const r = await teardownFootprint(this.#host.ctx, kept);
      await this.saveIndex().catch(() => {});
      this.#host.log(`manager: despawned ${name} (it was waiting to come back)`);
      const ended = await this.#endChildren(kept.lifecycleUid);
      return { name, durablesRemoved: r.durablesRemoved, ...requests.childrenEnded(ended) };
    }
    const a = this.get(name);
    const wasRetired = a.status === "retired";
    const exit = await a.halt("target-despawn");
    if (a.handle && exit === undefined) {
      this.#host.log(`manager: ${name}'s runner (pid ${a.handle.pid}) did not exit after SIGKILL`);
    }
    const r = wasRetired
      ? { durablesRemoved: [] as string[] }
      : await teardownFootprint(this.#host.ctx, a.plan);
    this.#agents.delete(name);
    this.#ended.add(lifecycleTag(a.plan.lifecycleUid));
    await this.saveIndex().catch(() => {});
    this.#host.log(`manager: despawned ${name}`);
    // What it spawned ends with it.
    const ended = await this.#endChildren(a.plan.lifecycleUid);
    return { name, durablesRemoved: r.durablesRemoved, ...requests.childrenEnded(ended) };
  }
}
