/**
 * `Manager`: the supervisor of one space on this machine. It reads the space's signer through
 * its secret store, self-mints its `supervisor` cred (re-minted at 75 %), holds a per-instance
 * lease, serves `status`, `ps`, `spawn`, `despawn`, `input` and `attach` on the control rail,
 * re-signs the daemon creds on a schedule (`remintDaemonCreds`, same store), and runs each agent
 * in its sandboxed runner through a registry runtime (the pty by default).
 *
 * A manager that stops (or crashes) does not leave agents behind: the pty lives in this
 * process, so its runners cannot outlive it anyway (`--die-with-parent`, and the terminal hangs
 * up). `stop()` despawns every agent; after a crash the next start sweeps what the index
 * recorded (processes, durables, creds, dirs). Re-adoption would need a per-agent pty holder
 * process outside the manager, which this build does not have.
 *
 * @module
 */
import type { NatsConnection, Subscription } from "nats";
import { CotalError } from "../errors.ts";
import type { CotalEndpoint } from "../endpoint/endpoint.ts";
import type { Presence } from "../endpoint/types.ts";
import type { DeploymentLayout } from "../permissions.ts";
import type { Runtime, RuntimeExit } from "../registry.ts";
import { errorText } from "../wire/connect.ts";
import { newLifecycleUid } from "../wire/names.ts";
import { workspaceSecretStore } from "../workspace/fs_secret_store.ts";
import { ControlVerifier } from "./control_auth.ts";
import { type ManagerSigning, managerSigning } from "./manager_signer.ts";
import type { SecretStore } from "../workspace/types.ts";
import { AttachSessions } from "./attach.ts";
import { CONTROL_VERSION, type JsonObject } from "./control_rail.ts";
import { findConnector } from "./connectors.ts";
import "./harness_connectors.ts";
import { MANAGER_LEASE_TTL_MS, ManagerLease } from "./lease.ts";
import {
  agentCredsKey,
  type IndexedAgent,
  type LifecycleContext,
  removeAgentDir,
  teardownFootprint,
  writeIndex,
} from "./lifecycle.ts";
import { type AgentRow, ManagedAgent } from "./managed_agent.ts";
import { createRuntime } from "./pty_runtime.ts";
import { agentsRootOf } from "./sandbox/isolation.ts";
import { HostSandbox } from "./host_sandbox.ts";
import { prepareAgent, runnerSandbox, socketDirFor } from "./agent_setup.ts";
import { planSpawn } from "./spawn_plan.ts";
import { healSpace } from "./space_heal.ts";
import { onRunnerExit } from "./restarts.ts";
import { isPresent, presenceHolds, rosterRow, rosterRows, sweepRoster } from "./roster.ts";
import {
  connectSupervisor,
  startSupervisorEndpoint,
  watchSupervisorConnection,
} from "./manager_broker.ts";
import { scheduleAgentRenewal } from "./agent_renewal.ts";
import { HolderLock } from "../workspace/holder_lock.ts";
import { assertProgram, parseSpawnRequest, type SpawnRequest } from "./spawn_request.ts";
import { childrenOf, delegatedSpawnHandler, maxChildren, SpawnRate } from "./delegated_spawn.ts";
import { lifecycleTag } from "../wire/names.ts";
import { startRunner } from "./start_runner.ts";
import { serveControl } from "./control_serve.ts";
import { awaitPresence } from "./readiness.ts";
import { scheduleDaemonRemint, scheduleSelfRenewal, type UpkeepHost } from "./cred_upkeep.ts";
import {
  DEFAULT_AGENT_CREDS_TTL_SECONDS,
  managerInstanceId,
  type ManagerOptions,
  type ManagerStatus,
  MAX_AGENTS,
} from "./manager_types.ts";

type State = "idle" | "starting" | "running" | "stopping" | "stopped";

function hostPort(url: string): string {
  return url.replace(/^[a-z]+:\/\//, "").replace(/\/.*$/, "");
}

/** The supervisor of one space. */
export class Manager {
  /** The space it supervises. */
  readonly space: string;
  /** The state directory its agents live under. */
  readonly root: string;
  /** Stable per (workspace root, space): a second manager on the same root is refused. */
  readonly instanceId: string;
  /** Per process: replies and sessions carry it, so a restarted manager's are told apart. */
  readonly epoch: string = newLifecycleUid();
  readonly #opts: ManagerOptions;
  readonly #servers: string[];
  readonly #store: SecretStore;
  readonly #log: (line: string) => void;
  readonly #agents = new Map<string, ManagedAgent>();
  #state: State = "idle";
  #signing?: ManagerSigning;
  #verifier?: ControlVerifier;
  #creds = "";
  #nc?: NatsConnection;
  #endpoint?: CotalEndpoint;
  #lease?: ManagerLease;
  #runtime?: Runtime;
  #subs: Subscription[] = [];
  #timers: ReturnType<typeof setTimeout>[] = [];
  #sessions?: AttachSessions;
  #startedAt = 0;
  #inflight = new Set<Promise<unknown>>();
  #sandbox?: HostSandbox;
  readonly #stopping = new AbortController();
  #holderLock?: HolderLock;
  #socketDir = "";
  /**
   * Roster rows kept without a running agent: lifecycles to bring back (read at start, or
   * left by a stop that keeps agents). They stay in the index until they run again.
   */
  readonly #kept = new Map<string, IndexedAgent>();
  /** Set by `stop({ keepAgents: true })`: agents are stopped, their lifecycles kept. */
  #keepAgents = false;
  /** Tags of lifecycles this manager ended: a stale presence row of theirs holds no name. */
  readonly #ended = new Set<string>();
  /** Each spawning parent's rate, by lifecycle (kept across its restarts). */
  readonly #spawnRates = new Map<string, SpawnRate>();
  /** Spawns plan one at a time: a name is taken before the next one is chosen. */
  #planning: Promise<unknown> = Promise.resolve();

  /** A manager for `opts.space`; nothing runs until `start()`. */
  constructor(opts: ManagerOptions) {
    if (typeof opts.space !== "string" || opts.space === "") {
      throw new CotalError("invalid_space", "The manager needs a space name; pass opts.space.");
    }
    if (typeof opts.workspaceRoot !== "string" || !opts.workspaceRoot.startsWith("/")) {
      throw new CotalError(
        "invalid_root",
        "The manager needs an absolute workspaceRoot (the .cotal state directory).",
      );
    }
    this.#opts = opts;
    this.space = opts.space;
    this.root = opts.workspaceRoot.replace(/\/+$/, "");
    this.#servers = [opts.servers ?? "nats://127.0.0.1:4222"].flat() as string[];
    this.#store = opts.secretStore ?? workspaceSecretStore(this.root);
    this.#log = opts.log ?? ((l) => console.error(`${new Date().toISOString()} ${l}`));
    this.instanceId = managerInstanceId(this.root, this.space);
  }

  get #principal() {
    return this.#signing?.principal ?? { owner: "local", actor: `manager_${this.instanceId}` };
  }

  get #ctx(): LifecycleContext {
    return {
      space: this.space,
      servers: this.#servers,
      signer: this.#signing!.signer,
      store: this.#store,
      injected: this.#opts.secretStore !== undefined,
      root: this.root,
      layout: this.#layout(),
      log: this.#log,
    };
  }

  #layout(): DeploymentLayout {
    return { ...this.#opts.layout, root: this.root, broker: this.#servers.map(hostPort) };
  }

  #mintSelf(): Promise<string> {
    return this.#signing!.mintSelf();
  }

  /**
   * Starts: signer, supervisor cred, lease, sweep of a crashed predecessor's agents, presence,
   * the control rail, renewal timers. A failure stops what was started and is thrown.
   */
  async start(): Promise<void> {
    if (this.#state !== "idle") {
      throw new CotalError(
        "already_started",
        "This manager was already started; create a new one.",
      );
    }
    this.#state = "starting";
    try {
      this.#signing = await managerSigning(this.#opts.signer, this.#store, this.space, {
        principal: this.#principal,
        composition: this.#opts.secretStore ? { injected: true } : { root: this.root },
      });
      this.#verifier = new ControlVerifier(this.#signing.trust);
      this.#runtime = await createRuntime(this.#opts.runtime ?? "pty");
      this.#sandbox = await HostSandbox.probe(this.#opts);
      this.#socketDir = await socketDirFor(this.#layout(), this.instanceId);
      this.#creds = this.#signing.initialCreds;
      this.#nc = await this.#connect();
      this.#signing.attach(this.#nc, () => this.#creds);
      this.#watchConnection(this.#nc);
      this.#holderLock = await this.#openHolderLock();
      this.#lease = await ManagerLease.acquire(this.#nc, this.space, {
        instanceId: this.instanceId,
        incarnation: this.epoch,
        pid: Deno.pid,
        root: this.root,
        runtime: this.#runtime.name,
        isolation: this.#sandbox.summary,
        since: Date.now(),
        lock: this.#holderLock.id,
      }, {
        waitMs: this.#opts.leaseWaitMs ?? MANAGER_LEASE_TTL_MS + 2_000,
        lock: this.#holderLock,
        log: this.#log,
      });
      this.#lease.keepAlive((why) => this.#log(`manager: ${why}; stop this manager`));
      await this.#sweep();
      await this.#healSpace();
      await Deno.mkdir(agentsRootOf(this.#layout()), { recursive: true, mode: 0o700 });
      this.#endpoint = await startSupervisorEndpoint({
        space: this.space,
        servers: this.#servers,
        principal: this.#principal,
        creds: () => this.#mintSelf(),
        log: this.#log,
      });
      this.#endpoint.setActivity(`supervisor (${this.#runtime.name})`);
      this.#sessions = new AttachSessions(() => this.#nc!, this.space, this.epoch);
      await this.#serve();
      scheduleSelfRenewal(this.#upkeep, async () => {
        this.#creds = await this.#mintSelf();
        await this.#nc?.reconnect();
      });
      // A remote-signing manager holds no seed to re-sign daemon creds with: the signer does.
      if (this.#signing.where === "local") {
        scheduleDaemonRemint(this.#upkeep, {
          root: this.root,
          space: this.space,
          store: this.#store,
          servers: this.#servers,
        });
      }
      this.#startedAt = Date.now();
      this.#state = "running";
      this.#log(
        `manager up (space ${this.space}, instance ${this.instanceId}, ${this.#runtime.name}, ${this.#sandbox.summary})`,
      );
      if (this.#kept.size) {
        this.#log(`manager: bringing back ${[...this.#kept.keys()].join(", ")}`);
        void this.#track(this.#bringBack());
      }
    } catch (err) {
      await this.#shutdown();
      this.#state = "idle";
      throw err;
    }
  }

  #connect(): Promise<NatsConnection> {
    return connectSupervisor({
      servers: this.#servers,
      creds: () => this.#creds,
      connId: this.#signing!.identity.id,
      space: this.space,
      waitForBroker: this.#opts.waitForBroker,
      log: this.#log,
      signal: this.#stopping.signal,
    });
  }

  #watchConnection(nc: NatsConnection): void {
    // A restarted broker lost the memory-backed presence bucket: put it back.
    watchSupervisorConnection(nc, this.#log, () =>
      void this.#track(
        this.#healSpace().catch((err) => this.#log(`manager: ${errorText(err)}`)),
      ));
  }

  /** This instance's holder lock: what lets its successor prove a crash (see `HolderLock`). */
  async #openHolderLock(): Promise<HolderLock> {
    const runDir = this.#opts.layout?.runDir ?? `${this.root}/run`;
    await Deno.mkdir(runDir, { recursive: true, mode: 0o700 });
    return await HolderLock.open(`${runDir}/manager.${this.instanceId}.lock`);
  }

  #healSpace(): Promise<boolean> {
    return healSpace({
      signer: this.#signing!.signer,
      servers: this.#servers,
      space: this.space,
      log: this.#log,
      signal: this.#stopping.signal,
    });
  }

  #later(ms: number, fn: () => void): void {
    this.#timers.push(setTimeout(fn, Math.max(1_000, ms)));
  }

  get #upkeep(): UpkeepHost {
    return {
      later: (ms, fn) => this.#later(ms, fn),
      track: (p) => this.#track(p),
      log: (l) => this.#log(l),
      running: () => this.#state === "running",
    };
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#inflight.add(p);
    p.finally(() => this.#inflight.delete(p)).catch(() => {});
    return p;
  }

  /** Clears what a previous manager left and keeps its roster to spawn again (roster.ts). */
  async #sweep(): Promise<void> {
    const { kept, found } = await sweepRoster(
      this.#ctx,
      this.instanceId,
      this.#socketDir,
      this.#sandbox?.host?.cgroup,
      this.#log,
    );
    for (const a of kept) this.#kept.set(a.name, a);
    if (found) await this.#saveIndex();
  }

  /** Spawns the kept roster again, one by one; one that cannot come back is torn down. */
  async #bringBack(): Promise<void> {
    for (const row of [...this.#kept.values()]) {
      if (this.#state !== "running") return;
      try {
        // Under its own name: a fresh one could be another kept agent's, not back yet.
        await this.spawn({ ...row.request!, name: row.name }, { lifecycleUid: row.lifecycleUid });
        this.#log(`manager: brought ${row.name} back (same lifecycle)`);
      } catch (err) {
        if (this.#state !== "running") return;
        this.#log(`manager: could not bring ${row.name} back (${errorText(err)}); removed it`);
        this.#kept.delete(row.name);
        await teardownFootprint(this.#ctx, row);
        await this.#endChildren(row.lifecycleUid);
        await this.#saveIndex().catch(() => {});
      }
    }
  }

  #saveIndex(): Promise<void> {
    return writeIndex(this.#ctx, this.instanceId, rosterRows(this.#agents, this.#kept));
  }

  async #serve(): Promise<void> {
    this.#subs.push(
      ...await serveControl(this.#nc!, {
        space: this.space,
        instanceId: this.instanceId,
        epoch: this.epoch,
        verifier: this.#verifier!,
        running: () => this.#state === "running",
        track: (p) => void this.#track(p),
        log: this.#log,
        ops: {
          status: () => this.status(),
          ps: () => this.ps(),
          spawn: (a) => this.spawn(a),
          despawn: (name) => this.despawn(name),
          agent: (name) => this.#get(name),
          attach: (agent, size) => this.#sessions!.open(agent, size),
          log: (l) => this.#log(l),
        },
      }),
    );
  }

  #get(name: string): ManagedAgent {
    const a = this.#agents.get(name);
    if (!a) {
      throw new CotalError(
        "not_found",
        `No agent named ${JSON.stringify(name)} is managed here; see 'cotal ps'.`,
      );
    }
    return a;
  }

  /** The manager's own facts, including the isolation in force. */
  status(): ManagerStatus {
    return {
      version: CONTROL_VERSION,
      space: this.space,
      instanceId: this.instanceId,
      epoch: this.epoch,
      pid: Deno.pid,
      root: this.root,
      runtime: this.#runtime?.name ?? "",
      isolation: this.#sandbox?.summary ?? "",
      ...(this.#signing ? { signing: this.#signing.where } : {}),
      agents: this.#agents.size,
      sessions: this.#sessions?.size ?? 0,
      uptimeMs: this.#startedAt ? Date.now() - this.#startedAt : 0,
    };
  }

  #roster(): Presence[] {
    try {
      return this.#endpoint?.getRoster() ?? [];
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

  /**
   * Spawns one agent and resolves once its presence appears (the readiness window), or
   * refuses with a typed error after undoing everything it provisioned.
   */
  async spawn(rawArgs: JsonObject, resume?: { lifecycleUid: string }): Promise<AgentRow> {
    const req = parseSpawnRequest(rawArgs);
    if (req.command) await assertProgram(req.command);
    const connector = findConnector(req.agent);
    // A kept lifecycle's own stale presence row does not hold its name.
    const taken = (n: string) =>
      this.#agents.has(n) || (!resume && this.#kept.has(n)) ||
      presenceHolds(this.#roster(), n, this.#ended, resume?.lifecycleUid);
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
        ctx: this.#ctx,
        taken,
        isolationMode: this.#opts.isolation ?? "bwrap",
        isolate: (r) => Promise.resolve(this.#sandbox!.isolate(r)),
        credsKey: (name, uid) => agentCredsKey(this.#ctx, name, uid),
        spaceLimits: this.#opts.agentLimits,
        ...(resume ? { lifecycleUid: resume.lifecycleUid } : {}),
      }).then((plan) => {
        const agent = new ManagedAgent(plan);
        agent.request = rawArgs;
        this.#agents.set(plan.name, agent);
        return agent;
      });
    });
    this.#planning = planned.catch(() => {});
    const agent = await planned;
    const plan = agent.plan;
    // Taken before any await, so two spawns in flight never share a socket slot.
    agent.slot = this.#freeSlot(agent);
    const ttl = this.#opts.agentCredsTtlSeconds ?? DEFAULT_AGENT_CREDS_TTL_SECONDS;
    try {
      await prepareAgent(this.#ctx, agent, {
        servers: this.#servers,
        slot: agent.slot!,
        socketDir: this.#socketDir,
        ...(this.#sandbox?.idPool ? { idPool: this.#sandbox.idPool } : {}),
        ...(req.module ? { moduleSource: req.module } : {}),
        subscribe: req.subscribe,
        ttlSeconds: ttl,
        description: req.description,
        ...(req.spawnable ? { spawn: this.#spawnRights(plan, req.spawnable) } : {}),
      });
      await this.#saveIndex();
      await this.#startRunner(agent);
      await this.#saveIndex();
      const present = () => this.#present(agent.id, agent.plan.lifecycleUid);
      await awaitPresence(agent, this.#endpoint!, present, req.readinessMs, this.#stopping.signal);
      this.#scheduleAgentRenewal(agent, ttl);
      this.#kept.delete(plan.name);
      this.#log(`manager: spawned ${plan.name} (${plan.connector}, pid ${agent.handle?.pid})`);
      return agent.row(true);
    } catch (err) {
      await agent.halt("spawn-failed");
      // A kept lifecycle interrupted by a stop that keeps agents stays on the roster.
      if (resume && this.#keepAgents) await removeAgentDir(plan.agentDir);
      else await teardownFootprint(this.#ctx, plan);
      this.#agents.delete(plan.name);
      await this.#saveIndex().catch(() => {});
      throw err;
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
    const handler = delegatedSpawnHandler(parent, templates, maxChildren(this.#opts), {
      spawn: (a) => this.#track(this.spawn(a)),
      despawn: (n) => this.despawn(n),
      children: () =>
        this.#childrenOf(uid).flatMap((n) => {
          const a = this.#agents.get(n);
          return a ? [a.row(this.#present(a.id, a.plan.lifecycleUid))] : [];
        }),
      count: () => this.#childrenOf(uid).length,
      rate,
      log: this.#log,
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
  async #endChildren(parentUid: string): Promise<void> {
    this.#spawnRates.delete(parentUid);
    await Promise.allSettled(this.#childrenOf(parentUid).map((c) => this.despawn(c)));
  }

  /** The lowest socket slot no other live agent holds (MAX_AGENTS bounds the agents). */
  #freeSlot(agent: ManagedAgent): number {
    const used = new Set(
      [...this.#agents.values()].filter((a) => a !== agent).map((a) => a.slot),
    );
    let slot = 0;
    while (used.has(slot)) slot++;
    return slot;
  }

  async #startRunner(agent: ManagedAgent): Promise<void> {
    const p = agent.plan;
    const started = await startRunner({
      layout: this.#layout(),
      agentDir: p.agentDir,
      spec: p.spec,
      isolation: p.isolation,
      sandbox: runnerSandbox(agent),
      runtime: this.#runtime,
      cols: agent.cols,
      rows: agent.rows,
      ...(p.env ? { extraEnv: p.env } : {}),
    });
    agent.attachHandle(started.handle, (exit) => this.#onExit(agent, exit));
  }

  #scheduleAgentRenewal(agent: ManagedAgent, ttlSeconds?: number): void {
    scheduleAgentRenewal(agent, {
      ctx: this.#ctx,
      store: this.#store,
      servers: this.#servers,
      ttlSeconds,
      log: this.#log,
    });
  }

  #onExit(agent: ManagedAgent, exit: RuntimeExit): void {
    onRunnerExit(agent, exit, {
      running: () => this.#state === "running",
      startRunner: (a) => this.#startRunner(a),
      teardown: async (a) => {
        await teardownFootprint(this.#ctx, a.plan);
        // A parent retired by its crash budget ends what it spawned.
        await this.#endChildren(a.plan.lifecycleUid);
      },
      saveIndex: () => this.#saveIndex(),
      track: (p) => this.#track(p),
      log: this.#log,
    });
  }

  /** Stops one agent for a later start to bring back: its roster row, lifecycle and durables stay. */
  async #keep(a: ManagedAgent): Promise<void> {
    if (a.status === "retired" || !a.request) return void await this.despawn(a.plan.name);
    await a.halt("manager-stop");
    await removeAgentDir(a.plan.agentDir);
    const { pid: _pid, ...row } = rosterRow(a);
    this.#kept.set(a.plan.name, row);
    this.#agents.delete(a.plan.name);
    await this.#saveIndex().catch(() => {});
    this.#log(`manager: stopped ${a.plan.name} (kept on the roster)`);
  }

  /** Stops one agent and removes its footprint (durables, ACL row, creds, dir). */
  async despawn(name: string): Promise<{ name: string; durablesRemoved: readonly string[] }> {
    const kept = this.#kept.get(name);
    this.#kept.delete(name);
    if (kept && !this.#agents.has(name)) {
      // On the roster, not running (yet): its lifecycle ends here.
      const r = await teardownFootprint(this.#ctx, kept);
      await this.#saveIndex().catch(() => {});
      this.#log(`manager: despawned ${name} (it was waiting to come back)`);
      await this.#endChildren(kept.lifecycleUid);
      return { name, durablesRemoved: r.durablesRemoved };
    }
    const a = this.#get(name);
    const wasRetired = a.status === "retired";
    const exit = await a.halt("target-despawn");
    if (a.handle && exit === undefined) {
      this.#log(`manager: ${name}'s runner (pid ${a.handle.pid}) did not exit after SIGKILL`);
    }
    const r = wasRetired
      ? { durablesRemoved: [] as string[] }
      : await teardownFootprint(this.#ctx, a.plan);
    this.#agents.delete(name);
    this.#ended.add(lifecycleTag(a.plan.lifecycleUid));
    await this.#saveIndex().catch(() => {});
    this.#log(`manager: despawned ${name}`);
    // What it spawned ends with it.
    await this.#endChildren(a.plan.lifecycleUid);
    return { name, durablesRemoved: r.durablesRemoved };
  }

  /**
   * Stops serving, despawns every agent, releases the lease and disconnects. With
   * `keepAgents`, agents are stopped but stay on the roster (lifecycle, creds, durables and
   * backlog kept): the next start on this root brings them back.
   */
  async stop(opts: { keepAgents?: boolean } = {}): Promise<void> {
    if (this.#state === "stopped" || this.#state === "stopping") return;
    this.#state = "stopping";
    this.#keepAgents = opts.keepAgents === true;
    this.#stopping.abort();
    await this.#shutdown();
    this.#state = "stopped";
    this.#log("manager stopped");
  }

  async #shutdown(): Promise<void> {
    for (const s of this.#subs.splice(0)) s.unsubscribe();
    for (const t of this.#timers.splice(0)) clearTimeout(t);
    this.#sessions?.endAll("manager-stop");
    await Promise.allSettled([...this.#inflight]);
    if (this.#keepAgents) {
      await Promise.allSettled([...this.#agents.values()].map((a) => this.#keep(a)));
    } else {
      await Promise.allSettled([...this.#agents.keys()].map((n) => this.despawn(n)));
      for (const row of [...this.#kept.values()]) {
        await teardownFootprint(this.#ctx, row);
        this.#kept.delete(row.name);
      }
      if (this.#signing) await this.#saveIndex().catch(() => {});
    }
    await this.#lease?.release();
    this.#holderLock?.close();
    await this.#endpoint?.stop().catch(() => {});
    await this.#nc?.close().catch(() => {});
    this.#signing?.close();
    this.#sandbox?.idPool?.releaseAll();
  }

  /** `await using` stops the manager. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
