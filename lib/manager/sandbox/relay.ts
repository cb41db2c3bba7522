/**
 * The only way out of an agent's network namespace: a unix socket the supervisor listens on and
 * binds into the sandbox, relayed to the broker. Inside, the runner forwards a loopback port
 * of its own namespace to that socket, so the agent's NATS client (and its program's) dials
 * `127.0.0.1:<port>` as usual and reaches the broker and nothing else: no host loopback
 * service, no other machine, and nothing on the host can dial in. What the agent sends goes
 * through its {@linkcode ProtocolGuard} (reply subjects only to its own inbox, see there).
 *
 * @module
 */

import {
  AGENT_STORED_BYTES_BURST,
  AGENT_STORED_BYTES_PER_SECOND,
  ByteBudget,
} from "./byte_budget.ts";
import { GUARD_MAX_LINE, type GuardPolicy, ProtocolGuard } from "./protocol_guard.ts";
import { concatAll } from "./guard_text.ts";
import { closeAll } from "./close_all.ts";

/** The loopback port the runner forwards inside the agent's namespace. */
export const RELAY_PORT = 4222;
/**
 * Broker connections one agent may hold through the relay at once: the runner's and a few of
 * the program's own. Each connection the agent stops reading can hold up to the broker's
 * `max_pending` (64 MiB) of writes it subscribed to before the broker cuts it, so this bounds
 * what one agent makes the broker buffer.
 */
export const MAX_RELAY_CONNECTIONS = 8;
/** How long the relay waits for the broker to accept one connection. */
export const RELAY_DIAL_TIMEOUT_MS = 5_000;
/**
 * How long a connection to a relay on the host's loopback may go without a CONNECT that proves
 * the agent's launch creds: anyone on the host can dial it, and each open connection holds one
 * of the agent's {@linkcode MAX_RELAY_CONNECTIONS}.
 */
export const RELAY_PROOF_DEADLINE_MS = 3_000;
/**
 * Connections a loopback relay holds before their CONNECT proves the launch creds. They do not
 * take the agent's {@linkcode MAX_RELAY_CONNECTIONS}: past this many, the oldest unproven one
 * is closed for the newest, so a stranger holding silent connections open cannot keep the agent
 * out (red team 19: 12 silent connections per port refused every new spawn).
 */
export const RELAY_MAX_UNPROVEN = 16;
/**
 * New connections one agent may open through its relay: a steady rate past a burst. Past it
 * the relay accepts nothing more for a while (the kernel queues or refuses the rest), so an
 * agent opening and closing connections in a loop costs the supervisor, whose one thread serves
 * every agent's relay, a bounded share (red team 14: 64 threads of connect/close made other
 * agents' round trips 250-790 ms and the operator's spawns time out).
 */
export const RELAY_CONNECT_RATE = Object.freeze({ perSecond: 20, burst: 40 });
/**
 * What each piece the guard sends on costs in the byte budget on top of its bytes: a line the
 * guard must re-write (a bare LF, odd spacing) costs it far more than a canonical line it passes
 * as is, so a stream of them is throttled sooner.
 */
export const RELAY_PIECE_COST = 64;
/**
 * Lines one agent may have the guard re-write: a steady rate past a burst, far below what its
 * byte budget alone allows (a bare `PING\n` is five bytes but a parse, a copy and a write), so a
 * stream of them holds the agent back within its first chunks (red team 15: 8 connections of
 * bare-LF PINGs slowed other agents 100x for the 16 s the byte burst lasted).
 */
export const RELAY_REWRITE_RATE = Object.freeze({ perSecond: 2_000, burst: 20_000 });

function hostPort(url: string): { hostname: string; port: number } {
  const hp = url.replace(/^[a-z]+:\/\//, "").replace(/\/.*$/, "");
  const m = /^\[?([^\]]*?)\]?(?::(\d+))?$/.exec(hp);
  return { hostname: m?.[1] || "127.0.0.1", port: Number(m?.[2] ?? 4222) };
}

async function dialAny(servers: readonly string[]): Promise<Deno.Conn | undefined> {
  for (const s of servers) {
    const { hostname, port } = hostPort(s);
    const timer = AbortSignal.timeout(RELAY_DIAL_TIMEOUT_MS);
    try {
      return await Promise.race([
        Deno.connect({ hostname, port, transport: "tcp" }),
        new Promise<never>((_, reject) =>
          timer.addEventListener("abort", () => reject(new Error("timeout")))
        ),
      ]);
    } catch {
      // The next server.
    }
  }
  return undefined;
}

/** Copies both ways until either side ends, then closes both. */
export async function splice(a: Deno.Conn, b: Deno.Conn): Promise<void> {
  const close = () => {
    for (const c of [a, b]) {
      try {
        c.close();
      } catch {
        // Already closed.
      }
    }
  };
  await Promise.race([
    a.readable.pipeTo(b.writable, { preventClose: true }).catch(() => {}),
    b.readable.pipeTo(a.writable, { preventClose: true }).catch(() => {}),
  ]);
  close();
}

/**
 * Relays one agent connection: the broker's bytes as they come, the agent's through its
 * {@linkcode ProtocolGuard}. A refusal tells the agent why (`-ERR`) and ends both sides.
 */
export async function guardedSplice(
  agent: Deno.Conn,
  broker: Deno.Conn,
  guard: ProtocolGuard,
  budget?: ByteBudget,
  stored?: ByteBudget,
  rewrites?: ByteBudget,
  onProven?: () => void,
): Promise<void> {
  // One writer per side: the broker's bytes and a refusal reach the agent in order. Writes are
  // queued behind the writer's backpressure, so reading the next chunk overlaps the last write.
  const toAgent = agent.writable.getWriter();
  const toBroker = broker.writable.getWriter();
  const unproven = guard.needsCallerProof
    ? setTimeout(() => {
      if (!guard.proven) closeAll([agent, broker]);
    }, RELAY_PROOF_DEADLINE_MS)
    : undefined;
  const down = (async () => {
    // The broker's first line is its INFO: when the relay proves the agent's key, the guard
    // must know that connection's nonce before the agent's CONNECT (which answers the INFO).
    let head: Uint8Array | undefined = guard.needsServerNonce ? new Uint8Array() : undefined;
    for await (const chunk of broker.readable) {
      let out = chunk;
      if (head) {
        const joined = new Uint8Array(head.length + chunk.length);
        joined.set(head);
        joined.set(chunk, head.length);
        const nl = joined.indexOf(0x0a);
        if (nl < 0 && joined.length <= GUARD_MAX_LINE) {
          head = joined;
          continue;
        }
        head = undefined;
        out = joined;
        if (nl >= 0) {
          const line = new TextDecoder().decode(joined.subarray(0, nl)).trim();
          const told = guard.serverInfo(line);
          if (told !== line) {
            const head = new TextEncoder().encode(`${told}\r\n`);
            out = new Uint8Array(head.length + joined.length - nl - 1);
            out.set(head);
            out.set(joined.subarray(nl + 1), head.length);
          }
        }
      }
      await toAgent.ready;
      toAgent.write(out).catch(() => {});
    }
  })().catch(() => {});
  const up = (async () => {
    // Each chunk of the stream is a fresh buffer: the guard's views stay valid while queued.
    let proven = false;
    for await (const chunk of agent.readable) {
      const step = guard.push(chunk);
      if (!proven && guard.proven) {
        proven = true;
        onProven?.();
      }
      // Many pieces (re-written lines) go on as one write, not one await each.
      const pieces = step.out.length > 8 ? [concatAll(step.out)] : step.out;
      for (const piece of pieces) {
        await toBroker.ready;
        toBroker.write(piece).catch(() => {});
      }
      // Over its budget, the agent waits: the next read (and so its sender) is held back.
      const wait = Math.max(
        budget?.take(chunk.length + RELAY_PIECE_COST * step.out.length) ?? 0,
        step.rewritten && rewrites ? rewrites.take(step.rewritten) : 0,
        step.stored && stored ? stored.take(step.stored) : 0,
      );
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (step.refused) {
        closeQuietly(broker);
        // The reason sits between single quotes; the guard's reasons never contain one.
        const why = step.refused.replace(/'/g, "");
        await toAgent.write(new TextEncoder().encode(`-ERR 'cotal relay: ${why}'\r\n`));
        return;
      }
    }
  })().catch(() => {});
  await Promise.race([down, up]);
  clearTimeout(unproven);
  await Promise.race([toAgent.ready, new Promise((r) => setTimeout(r, 1_000))]).catch(() => {});
  closeQuietly(agent);
  closeQuietly(broker);
}

function closeQuietly(c: Deno.Conn): void {
  try {
    c.close();
  } catch {
    // Already closed.
  }
}

/**
 * The supervisor's end: one listener per agent, each connection relayed to the broker. An agent
 * in its own network namespace dials a unix socket bound into its sandbox; one on the host's
 * network (or under Deno permissions alone) dials a loopback port, where the relay lets in only
 * a CONNECT that proves the agent's launch creds ({@linkcode GuardPolicy.callerKey}).
 */
export class BrokerRelay {
  /** The unix socket's path; empty for a loopback relay. */
  readonly path: string;
  /** The loopback port of a relay on the host's network. */
  readonly port?: number;
  readonly #listener: Deno.Listener;
  readonly #servers: readonly string[];
  readonly #policy: GuardPolicy;
  /** One budget for all of the agent's connections, and a stricter one for stored planes. */
  readonly #budget: ByteBudget;
  readonly #stored: ByteBudget;
  readonly #open = new Set<Promise<void>>();
  readonly #conns = new Set<Deno.Conn>();
  /** A loopback relay's connections before and after their CONNECT proved the launch creds. */
  readonly #unproven = new Set<Deno.Conn>();
  readonly #proven = new Set<Deno.Conn>();
  readonly #rewrites = new ByteBudget({
    rate: RELAY_REWRITE_RATE.perSecond,
    burst: RELAY_REWRITE_RATE.burst,
  });
  readonly #connects = new ByteBudget({
    rate: RELAY_CONNECT_RATE.perSecond,
    burst: RELAY_CONNECT_RATE.burst,
  });
  #closed = false;

  private constructor(
    path: string,
    listener: Deno.Listener,
    servers: readonly string[],
    policy: GuardPolicy,
    budgets: { all?: ByteBudget; stored?: ByteBudget },
  ) {
    this.path = path;
    if (listener.addr.transport === "tcp") this.port = (listener.addr as Deno.NetAddr).port;
    this.#listener = listener;
    this.#servers = servers;
    this.#policy = policy;
    this.#budget = budgets.all ?? new ByteBudget();
    this.#stored = budgets.stored ?? new ByteBudget({
      rate: AGENT_STORED_BYTES_PER_SECOND,
      burst: AGENT_STORED_BYTES_BURST,
    });
    this.#accept();
  }

  /**
   * Listens on `path` (0600, owned by `owner` when given) and relays to `servers` what
   * `policy` allows.
   */
  static async listen(
    path: string,
    servers: readonly string[],
    policy: GuardPolicy,
    owner?: { uid: number; gid: number },
    budgets: { all?: ByteBudget; stored?: ByteBudget } = {},
  ): Promise<BrokerRelay> {
    await Deno.remove(path).catch(() => {});
    const listener = Deno.listen({ transport: "unix", path });
    await Deno.chmod(path, 0o600);
    if (owner) await Deno.chown(path, owner.uid, owner.gid);
    return new BrokerRelay(path, listener, servers, policy, budgets);
  }

  /**
   * Listens on a free port of `127.0.0.1`, for an agent on the host's network: `policy` must
   * name the caller's key, since anything on the host can dial there.
   */
  static listenLoopback(
    servers: readonly string[],
    policy: GuardPolicy,
    budgets: { all?: ByteBudget; stored?: ByteBudget } = {},
  ): BrokerRelay {
    if (!policy.callerKey || !policy.proveKey) {
      throw new TypeError("A loopback relay proves the agent's key and checks its caller's.");
    }
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0, transport: "tcp" });
    return new BrokerRelay("", listener, servers, policy, budgets);
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        // Over its connection rate the agent waits: nothing more is accepted until it may.
        const pause = this.#connects.take(1);
        if (pause > 0) await new Promise((r) => setTimeout(r, pause));
        if (this.#closed) {
          conn.close();
          break;
        }
        const loopback = this.port !== undefined;
        if (loopback) {
          // Unproven connections have their own bound: the oldest gives way to the newest.
          if (this.#unproven.size >= RELAY_MAX_UNPROVEN) {
            const oldest = this.#unproven.values().next().value!;
            this.#unproven.delete(oldest);
            closeAll([oldest]);
          }
          this.#unproven.add(conn);
        } else if (this.#open.size >= MAX_RELAY_CONNECTIONS) {
          conn.close();
          continue;
        }
        this.#conns.add(conn);
        // A loopback connection takes one of the agent's slots once it proves the launch creds.
        const proven = () => {
          this.#unproven.delete(conn);
          if (this.#proven.size >= MAX_RELAY_CONNECTIONS) closeAll([conn]);
          else this.#proven.add(conn);
        };
        const p = (async () => {
          const up = await dialAny(this.#servers);
          if (!up || this.#closed) {
            conn.close();
            up?.close();
            return;
          }
          this.#conns.add(up);
          await guardedSplice(
            conn,
            up,
            new ProtocolGuard(
              loopback
                ? { ...this.#policy, advertise: { host: "127.0.0.1", port: this.port! } }
                : this.#policy,
            ),
            this.#budget,
            this.#stored,
            this.#rewrites,
            loopback ? proven : undefined,
          );
          this.#conns.delete(up);
        })().catch(() => {}).finally(() => {
          this.#conns.delete(conn);
          this.#unproven.delete(conn);
          this.#proven.delete(conn);
        });
        this.#open.add(p);
        p.finally(() => this.#open.delete(p));
      }
    } catch {
      // Listener closed.
    }
  }

  /** Times this agent's byte budget held it back. */
  get throttled(): number {
    return this.#budget.held + this.#stored.held + this.#rewrites.held;
  }

  /** Times the agent's connection rate held its next connection back. */
  get connectsHeld(): number {
    return this.#connects.held;
  }

  /** Connections relayed right now. */
  get connections(): number {
    return this.#open.size;
  }

  /** Stops listening and ends every relayed connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    closeAll([this.#listener, ...this.#conns]);
    await Promise.allSettled([...this.#open]);
    if (this.path) await Deno.remove(this.path).catch(() => {});
  }
}

/**
 * The runner's end, inside the sandbox: listens on `127.0.0.1:<port>` in the agent's own
 * network namespace and forwards each connection to the supervisor's socket. Returns a closer.
 */
export function forwardToRelay(socketPath: string, port = RELAY_PORT): () => void {
  const listener = Deno.listen({ hostname: "127.0.0.1", port, transport: "tcp" });
  (async () => {
    try {
      for await (const conn of listener) {
        Deno.connect({ transport: "unix", path: socketPath })
          .then((up) => splice(conn, up))
          .catch(() => conn.close());
      }
    } catch {
      // Closed.
    }
  })();
  return () => {
    try {
      listener.close();
    } catch {
      // Already closed.
    }
  };
}
