/**
 * One agent under a manager: what was provisioned for it, its runner process (restarted within
 * its limit), the tail of its terminal output (attach backlog and failure reports) and its
 * restart accounting.
 *
 * @module
 */
import type { RuntimeExit, RuntimeHandle } from "../registry.ts";
import { safeText } from "../safe_text.ts";
import type { Identity } from "../trust/mod.ts";
import type { Principal } from "../wire/mod.ts";
import type { AgentSpec } from "./launch.ts";
import type { AgentSandbox, SandboxFacts } from "./sandbox/agent_sandbox.ts";
import type { Isolation } from "./sandbox/isolation.ts";
import { signalGroup, signalProcess } from "./sandbox/libc.ts";
import type { AgentLimits } from "./sandbox/limits.ts";
import type { NetMode } from "./sandbox/plan.ts";

/** Bytes of terminal output kept per agent. */
export const OUTPUT_TAIL_BYTES = 64 * 1024;
/** How long a stop waits after SIGTERM before SIGKILL. */
export const STOP_GRACE_MS = 3_000;

/** Where an agent is in its life. */
export type AgentStatus =
  | "starting"
  | "running"
  | "restarting"
  | "stopping"
  | "retired";

/** How many crashes an agent survives, within what window. */
export interface RestartPolicy {
  readonly restarts: number;
  readonly windowMs: number;
}

/** The fixed facts of one managed agent (one lifecycle). */
export interface AgentPlan {
  /** Variables for this agent alone, from its spawn request (never in its launch file). */
  readonly env?: Readonly<Record<string, string>>;
  readonly name: string;
  readonly principal: Principal;
  readonly lifecycleUid: string;
  readonly identity: Identity;
  /** The connector it was launched through. */
  readonly connector: string;
  readonly role?: string;
  readonly agentDir: string;
  readonly launchFile: string;
  readonly spec: AgentSpec;
  readonly isolation: Isolation;
  readonly restart: RestartPolicy;
  readonly channels: {
    /** The channels it joins at start (its durable memberships). */
    readonly subscribe: readonly string[];
    readonly allowSubscribe: readonly string[];
    readonly allowPublish: readonly string[];
  };
  /** The secret-store key its creds are kept under. */
  readonly credsKey: string;
  /** Resources, network and paths of its sandbox. */
  readonly limits: AgentLimits;
  readonly net: NetMode;
  readonly workdir?: string;
  readonly expose: readonly string[];
}

/** A row of `ps`. */
export interface AgentRow {
  /** The agent's name in the space. */
  readonly name: string;
  /** Its principal id (`owner.actor`). */
  readonly id: string;
  /** Its lifecycle uid. */
  readonly lifecycleUid: string;
  /** Its connector (task-runner, module, program, ...). */
  readonly agent: string;
  /** The role it serves. */
  readonly role?: string;
  /** Where it is in its life. */
  readonly status: AgentStatus;
  /** Its runner's pid, while running. */
  readonly pid?: number;
  /** How often the supervisor restarted it. */
  readonly restarts: number;
  /** How long it has run. */
  readonly uptimeMs: number;
  /** The isolation in force for it. */
  readonly isolation: string;
  /** The isolation actually in force for it: uid, namespaces, network, limits. */
  readonly sandbox?: SandboxFacts;
  /** Whether its presence row is online right now. */
  readonly present: boolean;
  /** Why it is retired (or how it last exited). */
  readonly reason?: string;
}

/** A terminal listener (an attach session). */
export interface OutputSink {
  data(bytes: Uint8Array): void;
  end(reason: string): void;
}

/** One managed agent. The manager owns the policy; this holds the state. */
export class ManagedAgent {
  readonly plan: AgentPlan;
  status: AgentStatus = "starting";
  handle?: RuntimeHandle;
  startedAt = Date.now();
  reason?: string;
  /** Crash times inside the restart window. */
  readonly crashes: number[] = [];
  restartsUsed = 0;
  /** Why the supervisor killed its current runner as hung (the exit then says so). */
  hung?: string;
  cols = 120;
  rows = 32;
  renewTimer?: ReturnType<typeof setTimeout>;
  /** Its sandbox resources (uid, sockets, cgroup), from spawn to teardown. */
  sandbox?: AgentSandbox;
  /** Its socket slot while its sandbox lives. */
  slot?: number;
  /** The spawn request as given (the roster brings the agent back with it). */
  request?: Readonly<Record<string, unknown>>;
  /** The control request that spawned it (its nonce): a re-send finds this agent, not a new one. */
  requestId?: string;
  readonly sinks = new Set<OutputSink>();
  #tail: Uint8Array[] = [];
  #tailBytes = 0;
  #exit?: Promise<RuntimeExit>;

  constructor(plan: AgentPlan) {
    this.plan = plan;
  }

  /** The principal's dot form. */
  get id(): string {
    return `${this.plan.principal.owner}.${this.plan.principal.actor}`;
  }

  /** Adopts a freshly started runner: output is kept and fanned out, exit is remembered. */
  attachHandle(handle: RuntimeHandle, onExit: (exit: RuntimeExit) => void): void {
    this.handle = handle;
    this.startedAt = Date.now();
    handle.onData((d) => {
      this.#keep(d);
      for (const s of this.sinks) s.data(d);
    });
    this.#exit = new Promise((resolve) =>
      handle.onExit((e) => {
        resolve(e);
        onExit(e);
      })
    );
  }

  #keep(d: Uint8Array): void {
    this.#tail.push(d);
    this.#tailBytes += d.length;
    while (this.#tailBytes > OUTPUT_TAIL_BYTES && this.#tail.length > 1) {
      this.#tailBytes -= this.#tail.shift()!.length;
    }
  }

  /** The kept output, oldest first. */
  backlog(): Uint8Array {
    const out = new Uint8Array(this.#tailBytes);
    let at = 0;
    for (const c of this.#tail) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }

  /**
   * The last lines of output as one line of text (for failure messages): CSI sequences (colour,
   * cursor) dropped, every other control character shown as `\xNN`, so no escape sequence the
   * agent printed reaches the operator's terminal through a refusal.
   */
  lastLines(n = 5): string {
    const text = screenText(new TextDecoder().decode(this.backlog()));
    return text.split(/\r?\n/).map((l) => safeText(l.trim())).filter(Boolean).slice(-n).join(
      " | ",
    );
  }

  /** Resolves when the current runner exits. */
  exited(): Promise<RuntimeExit> {
    return this.#exit ?? Promise.resolve({ code: null, signal: null });
  }

  /**
   * Asks the runner to stop over its control channel (a signal to bwrap would tear the sandbox
   * down before the runner leaves presence), then SIGKILLs the runtime's child (bwrap, whose
   * death ends the sandbox) after the grace. Resolves with how it ended, or undefined when even
   * that did not end it within the grace (never a hang).
   */
  async stopRunner(graceMs = STOP_GRACE_MS): Promise<RuntimeExit | undefined> {
    const h = this.handle;
    if (!h) return undefined;
    const wait = (ms: number) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      return Promise.race([
        this.exited(),
        new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms))),
      ]).finally(() => clearTimeout(timer));
    };
    this.sandbox?.control.requestStop();
    const ended = await wait(graceMs);
    if (ended) return ended;
    signalProcess(h.pid, "SIGKILL");
    // Under deno-only there is no PID namespace to end with it: its whole group goes too.
    signalGroup(h.pid, "SIGKILL");
    return await wait(graceMs);
  }

  /** Ends every attach session. */
  /**
   * Stops the agent for good or for later: no renewal, its sessions ended with `reason`, its
   * runner stopped (SIGTERM, then SIGKILL), its sandbox closed. Resolves the runner's exit, or
   * undefined when it had none, outlived SIGKILL or could not be stopped.
   */
  async halt(reason: string): Promise<RuntimeExit | undefined> {
    this.status = "stopping";
    clearTimeout(this.renewTimer);
    this.endSessions(reason);
    const exit = await this.stopRunner().catch(() => undefined);
    await this.sandbox?.close();
    return exit;
  }

  endSessions(reason: string): void {
    for (const s of this.sinks) s.end(reason);
    this.sinks.clear();
  }

  /** The `ps` row. */
  row(present: boolean): AgentRow {
    const p = this.plan;
    return {
      name: p.name,
      id: this.id,
      lifecycleUid: p.lifecycleUid,
      agent: p.connector,
      ...(p.role ? { role: p.role } : {}),
      status: this.status,
      ...(this.handle && this.status !== "retired" ? { pid: this.handle.pid } : {}),
      restarts: this.restartsUsed,
      uptimeMs: this.status === "retired" ? 0 : Date.now() - this.startedAt,
      isolation: p.isolation.summary,
      ...(this.sandbox ? { sandbox: this.sandbox.facts() } : {}),
      present,
      ...(this.reason ? { reason: this.reason } : {}),
    };
  }
}

/**
 * What a terminal program's output reads as text: a cursor move forward (how full-screen
 * programs often space words) as spaces, other control sequences (CSI with any parameters,
 * OSC, DCS, charset and keypad escapes) and C0 controls but tab and newline dropped. Newcomer
 * pass 9 saw a harness's last words run together, with its private-mode queries shown raw.
 */
export function screenText(s: string): string {
  return s
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[(\d{0,3})C/g, (_m, n: string) => " ".repeat(Math.min(Number(n || 1), 8)))
    // A move to another column or line separates what was written before and after it
    // (newcomer pass 10 read "Pleasecheckyourinternetconnection" from a harness that places
    // each word with an absolute move).
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[\d;]*[ABEFGHdf]/g, " ")
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, "")
    // A string (OSC, DCS, APC, PM, SOS) up to its end; one never ended is left to the lines
    // below. `[^\x07\x1b]*`, not `[\s\S]*?`: each start then scans to the next ESC at most,
    // where 32,768 unended starts took 1.2 s of the supervisor's thread (red team 39).
    // deno-lint-ignore no-control-regex
    .replace(/\x1b[\]P_^X][^\x07\x1b]*(?:\x07|\x1b\\)/g, "")
    // deno-lint-ignore no-control-regex
    .replace(/\x1b[()*+][\x20-\x7e]|\x1b[\x20-\x7e]/g, "")
    // deno-lint-ignore no-control-regex
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, (c) => (c === "\r" ? "\r" : ""));
}
