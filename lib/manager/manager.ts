/**
 * `Manager`: the supervisor of one space on this machine. It reads the space's signer through
 * its secret store, self-mints its `supervisor` cred (re-minted at 75 %), holds a per-instance
 * lease, serves `status`, `ps`, `spawn`, `despawn`, `input` and `attach` on the control rail,
 * re-signs the daemon creds on a schedule (`remintDaemonCreds`, same store), and runs each agent
 * in its sandboxed runner through a registry runtime (the pty by default; its agents are a
 * `Fleet`, lib/manager/fleet.ts).
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
import type { CotalEndpoint } from "../endpoint/mod.ts";
import type { DeploymentLayout } from "../permissions.ts";
import type { Runtime } from "../registry.ts";
import { errorText, newLifecycleUid } from "../wire/mod.ts";
import { HolderLock, workspaceSecretStore } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { ControlVerifier } from "./control_auth.ts";
import { type ManagerSigning, managerSigning } from "./manager_signer.ts";
import { AgentBearers, userAuthOfRoot } from "./agent_bearers.ts";
import { requestProver } from "../trust/mod.ts";
import { AttachSessions } from "./attach.ts";
import { CONTROL_VERSION, type JsonObject } from "./control_rail.ts";
import "./harness_connectors.ts";
import { MANAGER_LEASE_TTL_MS, ManagerLease } from "./lease.ts";
import type { LifecycleContext } from "./lifecycle.ts";
import type { AgentRow } from "./managed_agent.ts";
import { type DespawnResult, Fleet } from "./fleet.ts";
import { createRuntime } from "./pty_runtime.ts";
import { agentsRootOf } from "./sandbox/isolation.ts";
import { HostSandbox } from "./host_sandbox.ts";
import { uncapFileTable } from "./sandbox/file_table.ts";
import { socketDirFor } from "./agent_setup.ts";
import { healSpace } from "./space_heal.ts";
import { sweepRoster } from "./roster.ts";
import {
  connectSupervisor,
  startSupervisorEndpoint,
  watchSupervisorConnection,
} from "./manager_broker.ts";
import { serveControl } from "./control_serve.ts";
import { scheduleDaemonRemint, scheduleSelfRenewal, type UpkeepHost } from "./cred_upkeep.ts";
import { managerInstanceId, type ManagerOptions, type ManagerStatus } from "./manager_types.ts";

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
  #state: State = "idle";
  #signing?: ManagerSigning;
  /** User mode: its agents' bearers from the space's auth service. */
  #bearers?: AgentBearers;
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
  /** Set by `stop({ keepAgents: true })`: agents are stopped, their lifecycles kept. */
  #keepAgents = false;
  /** Its agents, running and kept. */
  readonly #fleet: Fleet;

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
    // The fleet reads what it needs when it needs it: most of it exists only once started.
    // deno-lint-ignore no-this-alias
    const self = this;
    this.#fleet = new Fleet({
      get ctx() {
        return self.#ctx;
      },
      opts,
      instanceId: this.instanceId,
      servers: this.#servers,
      get socketDir() {
        return self.#socketDir;
      },
      get layout() {
        return self.#layout();
      },
      store: this.#store,
      get sandbox() {
        return self.#sandbox;
      },
      get runtime() {
        return self.#runtime;
      },
      get endpoint() {
        return self.#endpoint;
      },
      stopping: this.#stopping.signal,
      get keepAgents() {
        return self.#keepAgents;
      },
      running: () => this.#state === "running",
      track: (p) => this.#track(p),
      log: (l) => this.#log(l),
    });
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
      ...(this.#bearers ? { bearers: this.#bearers } : {}),
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
      if (this.#sandbox.idPool) {
        // Agents under their own uids: the host's open-file table is no pool they share.
        const said = uncapFileTable();
        if (said) this.#log(`manager: ${said}`);
      }
      this.#socketDir = await socketDirFor(this.#layout(), this.instanceId);
      this.#creds = this.#signing.initialCreds;
      this.#nc = await this.#connect();
      this.#signing.attach(this.#nc, () => this.#creds);
      this.#watchConnection(this.#nc);
      const userAuth = this.#opts.userAuth === false
        ? undefined
        : this.#opts.userAuth ?? await userAuthOfRoot(this.root, this.space);
      if (userAuth) {
        this.#bearers = await AgentBearers.open({
          ...userAuth,
          principal: this.#principal,
          prover: () => requestProver(this.#creds),
          log: this.#log,
        });
      }
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
      const kept = this.#fleet.keptNames();
      if (kept.length) {
        this.#log(`manager: bringing back ${kept.join(", ")}`);
        void this.#track(this.#fleet.bringBack());
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
    // A fired timer leaves the list: short-lived daemon creds re-sign every few seconds.
    const t = setTimeout(() => {
      this.#timers = this.#timers.filter((x) => x !== t);
      fn();
    }, Math.max(1_000, ms));
    this.#timers.push(t);
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
    this.#fleet.adoptKept(kept);
    if (found) await this.#fleet.saveIndex();
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
          spawn: (a, requestId) => this.#fleet.spawn(a, undefined, requestId),
          despawn: (name) => this.despawn(name),
          agent: (name) => this.#fleet.get(name),
          attach: (agent, size) => this.#sessions!.open(agent, size),
          log: (l) => this.#log(l),
        },
      }),
    );
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
      agentAuth: this.#bearers ? "user" : "creds",
      agents: this.#fleet.size,
      sessions: this.#sessions?.size ?? 0,
      uptimeMs: this.#startedAt ? Date.now() - this.#startedAt : 0,
      bringBack: this.#fleet.bringBackReport(),
    };
  }

  /** Every managed agent, with its presence fact. */
  ps(): AgentRow[] {
    return this.#fleet.ps();
  }

  /**
   * Spawns one agent and resolves once its presence appears (the readiness window), or
   * refuses with a typed error after undoing everything it provisioned.
   */
  spawn(rawArgs: JsonObject): Promise<AgentRow> {
    return this.#fleet.spawn(rawArgs);
  }

  /** Stops one agent and removes its footprint (durables, ACL row, creds, dir). */
  despawn(name: string): Promise<DespawnResult> {
    return this.#fleet.despawn(name);
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
    await this.#fleet.stopAll(this.#keepAgents, this.#signing !== undefined);
    this.#bearers?.close();
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
