/**
 * One agent's sandbox resources on the supervisor's side, made before its runner starts and
 * released after it ends: its uid, its launch dir (supervisor-owned, read-only inside), the
 * generated `/etc` files, the control channel, the broker relay, and its cgroup. `facts()` is
 * what `ps` shows as the isolation actually in force.
 *
 * @module
 */
import { scopeUnavailable } from "./landlock.ts";
import { CotalError } from "../../errors.ts";
import { agentSocketPath } from "../../permissions.ts";
import { type AgentCgroup, cgroupName, createAgentCgroup, removeAgentCgroup } from "./cgroup.ts";
import type { CgroupHost } from "./cgroup.ts";
import { ControlChannel } from "./control_channel.ts";
import { SpawnChannel, type SpawnChannelHandler } from "./spawn_channel.ts";
import { mountDevpts, unmount } from "./libc.ts";
import type { AgentIds } from "./ids.ts";
import { type AgentLimits, describeLimits } from "./limits.ts";
import { etcContents, type NetMode } from "./plan.ts";
import type { GuardPolicy } from "./protocol_guard.ts";
import { BrokerRelay } from "./relay.ts";

/** What `ps` and `status` report about one agent's isolation. */
export interface SandboxFacts {
  /** How the agent is isolated. */
  readonly mode: "bwrap" | "deno-only";
  /** The uid it runs as. */
  readonly uid: number;
  /** The gid it runs as. */
  readonly gid: number;
  /** Namespaces the agent has of its own. */
  readonly namespaces: readonly string[];
  /** Its network: the relay, or the host's. */
  readonly net: NetMode | "host (deno-only)";
  /** Whether a seccomp filter applies. */
  readonly seccomp: boolean;
  /**
   * Whether its processes took the Landlock scope: no abstract unix socket or signal reaches
   * outside the sandbox (absent under deno-only).
   */
  readonly landlockScope?: boolean;
  /** `v1`, `v2`, or `none` (rlimits only). */
  readonly cgroup: "v1" | "v2" | "none";
  /** Its limits, by name. */
  readonly limits: Readonly<Record<string, string>>;
  /** Its workdir, if it has one. */
  readonly workdir?: string;
}

/** Options of {@linkcode AgentSandbox.create}. */
export interface AgentSandboxOptions {
  readonly name: string;
  /** A short id unique to this lifecycle (its cgroup's name). */
  readonly unique: string;
  /** Its socket slot (see `agentSocketPath`). */
  readonly slot: number;
  /** The agent's launch dir on the host (made fresh by the caller, 0700). */
  readonly agentDir: string;
  /** Where its sockets go (short enough for a unix socket path). */
  readonly socketDir: string;
  readonly mode: "bwrap" | "deno-only";
  readonly ids: AgentIds;
  /** Whether the runner drops to `ids` (root supervisor). */
  readonly switchUser: boolean;
  readonly limits: AgentLimits;
  readonly net: NetMode;
  readonly servers: readonly string[];
  /** The agent's inbox prefix (`_INBOX_<id>`): the only reply subjects its relay passes. */
  readonly inboxPrefix: string;
  /** Rails whose answers come on `<subject>.reply.*` (the delivery daemon's, for this agent). */
  readonly boundRails?: readonly string[];
  /** Subject prefixes of the planes the broker stores for others (the stricter byte budget). */
  readonly storedPrefixes?: readonly string[];
  /**
   * The agent's key, held here: its relay signs each connection's nonce, so the agent is given
   * its JWT alone (relayed creds) and holds nothing that connects anywhere but through it.
   */
  readonly proveKey?: GuardPolicy["proveKey"];
  /**
   * The stand-in key of its relayed creds: an agent on the host's network (or under Deno
   * permissions alone) reaches its relay on a loopback port anyone on the host can dial, and
   * proves the creds at connect.
   */
  readonly callerKey?: GuardPolicy["callerKey"];
  /** User mode: what its relay presents in place of its launch JWT (see `GuardPolicy`). */
  readonly bearer?: GuardPolicy["bearer"];
  /** The stand-in seed of its relayed creds (kept, so a renewal's rewrite proves the same). */
  readonly standInSeed?: string;
  readonly workdir?: string;
  readonly cgroupHost?: CgroupHost;
  readonly seccomp: boolean;
  /** The personas it may spawn and who serves its requests: it gets a spawn channel. */
  readonly spawn?: { readonly personas: readonly string[]; readonly handler: SpawnChannelHandler };
}

/** Where an agent's own devpts instance is mounted on the host (beside its sockets). */
export function ptsDirPath(socketDir: string, slot: number): string {
  return `${socketDir}/${slot}.pts`;
}

function releasePts(dir: string): void {
  unmount(dir);
  try {
    Deno.removeSync(dir);
  } catch {
    // Still busy, or gone: the next start of this supervisor sweeps it.
  }
}

/** The longest unix socket path Linux takes (`sun_path` is 108 bytes with its NUL). */
export const MAX_SOCKET_PATH = 107;

/** One agent's sandbox resources. */
export class AgentSandbox {
  readonly opts: AgentSandboxOptions;
  readonly control: ControlChannel;
  readonly relay?: BrokerRelay;
  /** Its spawn channel (an agent that may spawn personas). */
  spawnChannel?: SpawnChannel;
  readonly cgroup?: AgentCgroup;
  /** Its own capped devpts instance (a root supervisor's agents). */
  readonly ptsDir?: string;
  /**
   * Its processes take the Landlock scope (`landlock.ts`): always on the host's network, and
   * on its own network wherever the kernel has scopes (there its namespace already hides the
   * host's abstract sockets; the scope is a second layer).
   */
  readonly landlockScope: boolean;
  /** `/etc` name → generated host file. */
  readonly etcFiles: Readonly<Record<string, string>>;
  #closed = false;

  /** The uid the agent was switched to (a supervisor that switches uids), else undefined. */
  get switchedUid(): number | undefined {
    return this.opts.switchUser ? this.opts.ids.uid : undefined;
  }

  private constructor(
    opts: AgentSandboxOptions,
    control: ControlChannel,
    relay: BrokerRelay | undefined,
    cgroup: AgentCgroup | undefined,
    etcFiles: Record<string, string>,
    ptsDir: string | undefined,
    landlockScope: boolean,
  ) {
    this.opts = opts;
    this.control = control;
    this.relay = relay;
    this.cgroup = cgroup;
    this.etcFiles = etcFiles;
    this.ptsDir = ptsDir;
    this.landlockScope = landlockScope;
  }

  /** Makes everything the runner's sandbox binds in; undoes it all if a step fails. */
  static async create(opts: AgentSandboxOptions): Promise<AgentSandbox> {
    const owner = opts.switchUser ? { uid: opts.ids.uid, gid: opts.ids.gid } : undefined;
    const controlPath = agentSocketPath(opts.socketDir, opts.slot, "control");
    if (controlPath.length > MAX_SOCKET_PATH) {
      throw new CotalError(
        "sandbox_socket_path",
        `The agent socket path ${controlPath} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter --root.`,
      );
    }
    let control: ControlChannel | undefined;
    let spawn: SpawnChannel | undefined;
    let relay: BrokerRelay | undefined;
    let cgroup: AgentCgroup | undefined;
    let ptsDir: string | undefined;
    try {
      const etcFiles: Record<string, string> = {};
      if (opts.mode === "bwrap") {
        await Deno.mkdir(`${opts.agentDir}/etc`, { mode: 0o755 });
        for (const [name, text] of Object.entries(etcContents(opts.ids))) {
          const file = `${opts.agentDir}/etc/${name}`;
          await Deno.writeTextFile(file, text, { mode: 0o644, createNew: true });
          etcFiles[name] = file;
        }
      }
      if (owner) await Deno.chown(opts.agentDir, owner.uid, owner.gid);
      control = await ControlChannel.listen(controlPath, owner);
      if (opts.spawn) {
        spawn = await SpawnChannel.listen(
          agentSocketPath(opts.socketDir, opts.slot, "spawn"),
          opts.spawn.handler,
          owner,
        );
      }
      const policy = {
        inboxPrefix: opts.inboxPrefix,
        boundRails: opts.boundRails ?? [],
        storedPrefixes: opts.storedPrefixes ?? [],
        ...(opts.proveKey ? { proveKey: opts.proveKey } : {}),
        ...(opts.proveKey && opts.bearer ? { bearer: opts.bearer } : {}),
      };
      if (opts.mode === "bwrap" && opts.net === "relay") {
        const brokerPath = agentSocketPath(opts.socketDir, opts.slot, "broker");
        relay = await BrokerRelay.listen(brokerPath, opts.servers, policy, owner);
      } else if (opts.proveKey && opts.callerKey) {
        relay = BrokerRelay.listenLoopback(opts.servers, { ...policy, callerKey: opts.callerKey });
      }
      const hostNet = opts.mode === "bwrap" && opts.net === "host";
      if (hostNet && !opts.cgroupHost?.guardParent) {
        throw new CotalError(
          "net_host_unguarded",
          "An agent on the host's network needs a cgroup v2 group the supervisor can make as " +
            "root, to refuse it every IP bind (it could take the broker's port while the " +
            "broker restarts); run it on its own network (leave out --net host), or run the " +
            "supervisor as root on a host with cgroup v2.",
        );
      }
      const unscoped = opts.mode === "bwrap" ? scopeUnavailable() : "not a bwrap sandbox";
      if (hostNet && unscoped) {
        throw new CotalError(
          "net_host_unscoped",
          `An agent on the host's network would reach every abstract unix socket the host's ` +
            `services listen on, and ${unscoped}; run it on its own network (leave out ` +
            "--net host).",
        );
      }
      if (opts.mode === "bwrap" && opts.cgroupHost) {
        cgroup = createAgentCgroup(
          opts.cgroupHost,
          cgroupName(opts.name, opts.unique),
          opts.limits,
          hostNet ? { hostNet: { loopbackPorts: hostNetLoopback(relay, opts.servers) } } : {},
        );
      }
      if (opts.mode === "bwrap" && opts.switchUser) {
        const dir = ptsDirPath(opts.socketDir, opts.slot);
        unmount(dir);
        await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
        mountDevpts(dir, opts.limits.ptys);
        ptsDir = dir;
      }
      const made = new AgentSandbox(
        opts,
        control,
        relay,
        cgroup,
        etcFiles,
        ptsDir,
        !unscoped,
      );
      made.spawnChannel = spawn;
      return made;
    } catch (err) {
      await control?.close();
      await spawn?.close();
      await relay?.close();
      if (cgroup) await removeAgentCgroup(cgroup);
      if (ptsDir) releasePts(ptsDir);
      throw err;
    }
  }

  /** The control socket on the host. */
  get controlSocket(): string {
    return this.control.path;
  }

  /** The spawn channel's socket on the host (an agent that may spawn). */
  get spawnSocket(): string | undefined {
    return this.spawnChannel?.path;
  }

  /** The relay socket on the host (relay mode). */
  get brokerSocket(): string | undefined {
    return this.relay?.path || undefined;
  }

  /** The relay's loopback port (an agent on the host's network or under Deno permissions). */
  get brokerPort(): number | undefined {
    return this.relay?.port;
  }

  /** The isolation this agent actually runs under. */
  facts(): SandboxFacts {
    const o = this.opts;
    if (o.mode === "deno-only") {
      return {
        mode: "deno-only",
        uid: o.ids.uid,
        gid: o.ids.gid,
        namespaces: [],
        net: "host (deno-only)",
        seccomp: false,
        cgroup: "none",
        limits: {},
        ...(o.workdir ? { workdir: o.workdir } : {}),
      };
    }
    return {
      mode: "bwrap",
      uid: o.ids.uid,
      gid: o.ids.gid,
      namespaces: [
        "mount",
        "pid",
        "ipc",
        "uts",
        "cgroup",
        ...(o.net === "relay" ? ["net"] : []),
        ...(o.switchUser ? [] : ["user"]),
      ],
      net: o.net,
      seccomp: o.seccomp,
      landlockScope: this.landlockScope,
      cgroup: this.cgroup ? (this.cgroup.version === 2 ? "v2" : "v1") : "none",
      limits: describeLimits(o.limits),
      ...(o.workdir ? { workdir: o.workdir } : {}),
    };
  }

  /** Releases the sockets, the cgroup (once its processes are gone) and the uid. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.control.close();
    await this.spawnChannel?.close();
    await this.relay?.close();
    if (this.cgroup) await removeAgentCgroup(this.cgroup);
    if (this.ptsDir) releasePts(this.ptsDir);
    this.opts.ids.release();
  }
}

/**
 * The loopback ports an agent on the host's network may reach: its relay's, or, unrelayed, the
 * broker's own when the broker listens on loopback. Nothing else on the host's loopback.
 */
function hostNetLoopback(relay: BrokerRelay | undefined, servers: readonly string[]): number[] {
  if (relay?.port) return [relay.port];
  const ports: number[] = [];
  for (const s of servers) {
    try {
      const u = new URL(s.includes("://") ? s : `nats://${s}`);
      ports.push(Number(u.port || 4222));
    } catch {
      // Not a URL the client could dial either.
    }
  }
  return ports;
}
