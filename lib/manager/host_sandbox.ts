/**
 * The sandbox this machine gives a manager's agents, probed once at the manager's start: the
 * host's isolation verdict, the pool of agent ids when a root supervisor drops to them, and the
 * one-line summary `status` reports. Per spawn it chooses the isolation a request gets.
 *
 * @module
 */
import { isCotalError } from "../errors.ts";
import {
  chooseIsolation,
  type HostIsolation,
  type Isolation,
  type IsolationMode,
  type IsolationRequest,
  probeIsolation,
} from "./sandbox/isolation.ts";
import { AgentIdPool, type AgentIdRange } from "./sandbox/ids.ts";

/** What {@linkcode HostSandbox.probe} needs of the manager's options. */
export interface HostSandboxOptions {
  readonly isolation?: IsolationMode;
  readonly bwrap?: string;
  readonly agentIds?: AgentIdRange;
  readonly idLockDir?: string;
}

/** A manager's view of this machine's sandbox, for its whole life. */
export class HostSandbox {
  /** The host's verdict (absent under `deno-only`). */
  readonly host?: HostIsolation;
  /** Agent ids to drop to, when the supervisor is root and bwrap can switch users. */
  readonly idPool?: AgentIdPool;
  /** What `status` says about isolation (or why untrusted agents are refused). */
  readonly summary: string;
  /** Root: a deno-only runner would be root too (untrusted agents are refused then). */
  readonly #asRoot = Deno.uid() === 0;

  private constructor(
    host: HostIsolation | undefined,
    idPool: AgentIdPool | undefined,
    mode: IsolationMode,
  ) {
    this.host = host;
    this.idPool = idPool;
    let summary: string;
    try {
      summary = this.isolate({ mode }).summary;
    } catch (err) {
      summary = `none: untrusted agents are refused (${
        isCotalError(err) ? `${err.code}: ${err.message}` : "error"
      })`;
    }
    this.summary = summary;
  }

  /** Probes this machine's sandbox once; its verdict holds for the manager's life. */
  static async probe(opts: HostSandboxOptions): Promise<HostSandbox> {
    const mode = opts.isolation ?? "bwrap";
    if (mode !== "bwrap") return new HostSandbox(undefined, undefined, mode);
    const host = await probeIsolation({ ...(opts.bwrap ? { bwrap: opts.bwrap } : {}) });
    const idPool = host.bwrap && host.switchUser
      ? new AgentIdPool(opts.agentIds, opts.idLockDir)
      : undefined;
    return new HostSandbox(host, idPool, mode);
  }

  /** The isolation one request gets on this machine. */
  isolate(request: IsolationRequest): Isolation {
    if (request.mode === "deno-only") return chooseIsolation({ ...request, asRoot: this.#asRoot });
    return chooseIsolation({ ...request, ...this.host });
  }
}
