/**
 * The supervisor's line to one runner: a unix socket the supervisor owns, bound read-only into
 * the sandbox, that the runner dials before it runs any agent code. The supervisor asks the
 * runner to stop by writing `stop` on it; the runner also stops when the line drops (the
 * supervisor is gone). Nothing of it lives where the agent can write, so the agent can neither
 * redirect a stop (a symlink) nor hang one (a FIFO): the file protocol it replaces could be.
 *
 * The same line proves the runner alive: the supervisor writes `ping` every few seconds and the
 * runner answers `pong`. A runner that stops answering (frozen with SIGSTOP by its own agent, or
 * wedged by a module that blocks its event loop) is reported once, so the supervisor can kill it
 * and let the restart policy decide: otherwise it would sit "running" forever, absent from the
 * mesh. Only the connection the runner opened counts; what the agent dials in itself is drained
 * and never heard, so it cannot answer for a runner it froze.
 *
 * @module
 */

import { closeAll } from "./close_all.ts";
import { ByteBudget } from "./byte_budget.ts";

/** Connections one control socket accepts (the runner's, and room for a reconnect). */
export const MAX_CONTROL_CONNECTIONS = 2;
/** New connections one control socket accepts: a steady rate past a burst (a runner needs one). */
export const CONTROL_CONNECT_RATE = Object.freeze({ perSecond: 4, burst: 8 });
const STOP = new TextEncoder().encode("stop\n");
const PING = new TextEncoder().encode("ping\n");
const PONG = new TextEncoder().encode("pong\n");

/** How often the supervisor asks the runner whether it is alive. */
export const RUNNER_PING_EVERY_MS = 5_000;
/**
 * How long a runner may go without answering before it counts as hung: six pings, long past any
 * pause a healthy runner takes (a garbage collection, a busy module's await).
 */
export const RUNNER_HUNG_AFTER_MS = 30_000;

/** Timings of the liveness probe (tests shorten them; the daemon uses the constants). */
export interface ProbeTimings {
  readonly pingEveryMs: number;
  readonly hungAfterMs: number;
}

/** The supervisor's end. */
export class ControlChannel {
  readonly path: string;
  readonly #listener: Deno.Listener;
  readonly #conns = new Set<Deno.Conn>();
  readonly #connects = new ByteBudget({
    rate: CONTROL_CONNECT_RATE.perSecond,
    burst: CONTROL_CONNECT_RATE.burst,
  });
  #stopping = false;
  #closed = false;
  #connected = Promise.withResolvers<void>();
  /** The runner's connection: the first one while none is open (it dials before the agent runs). */
  #runner?: Deno.Conn;
  #heardAt = 0;
  #tickAt = Date.now();
  #reported = false;
  #onSilent?: () => void;
  readonly #timings: ProbeTimings;
  readonly #probe: ReturnType<typeof setInterval>;

  private constructor(path: string, listener: Deno.Listener, timings: ProbeTimings) {
    this.path = path;
    this.#listener = listener;
    this.#timings = timings;
    this.#probe = setInterval(() => this.#tick(), timings.pingEveryMs);
    this.#accept();
  }

  /** Listens on `path` (0600, owned by `owner` when given). */
  static async listen(
    path: string,
    owner?: { uid: number; gid: number },
    timings: ProbeTimings = {
      pingEveryMs: RUNNER_PING_EVERY_MS,
      hungAfterMs: RUNNER_HUNG_AFTER_MS,
    },
  ): Promise<ControlChannel> {
    await Deno.remove(path).catch(() => {});
    const listener = Deno.listen({ transport: "unix", path });
    await Deno.chmod(path, 0o600);
    if (owner) await Deno.chown(path, owner.uid, owner.gid);
    return new ControlChannel(path, listener, timings);
  }

  /**
   * Calls `cb` once per runner that has not answered a ping for the hung window. A restarted
   * runner (a new connection) is watched afresh.
   */
  onSilent(cb: () => void): void {
    this.#onSilent = cb;
  }

  /** How long the runner has been silent, or undefined while no runner is connected. */
  silentMs(now = Date.now()): number | undefined {
    return this.#runner ? now - this.#heardAt : undefined;
  }

  #tick(): void {
    const now = Date.now();
    // A supervisor that was itself frozen (SIGSTOP, a suspended VM) heard nothing meanwhile:
    // that is not the runner's silence, so its window starts again.
    if (now - this.#tickAt > 2 * this.#timings.pingEveryMs) this.#heardAt = now;
    this.#tickAt = now;
    const runner = this.#runner;
    if (!runner || this.#closed) return;
    if (!this.#reported && now - this.#heardAt > this.#timings.hungAfterMs) {
      this.#reported = true;
      this.#onSilent?.();
    }
    runner.write(PING).catch(() => {});
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        // Over the rate the agent waits: nothing more is accepted until it may (red team 38
        // churned connections here at a core's worth of the supervisor's time).
        const pause = this.#connects.take(1);
        if (pause > 0) await new Promise((r) => setTimeout(r, pause));
        if (this.#closed) {
          conn.close();
          break;
        }
        if (this.#conns.size >= MAX_CONTROL_CONNECTIONS) {
          conn.close();
          continue;
        }
        this.#conns.add(conn);
        if (!this.#runner) {
          this.#runner = conn;
          this.#heardAt = Date.now();
          this.#reported = false;
          conn.write(PING).catch(() => {});
        }
        this.#connected.resolve();
        if (this.#stopping) this.#send(conn);
        // The runner writes only its pongs; what an agent writes is drained slowly (a few KiB/s),
        // so a flood costs the supervisor nothing and blocks only the agent. Its end is still seen.
        this.#drain(conn).finally(() => {
          this.#conns.delete(conn);
          if (this.#runner === conn) this.#runner = undefined;
          // Closed here, at its end: red team 38 left one open descriptor per connection it
          // closed, until the supervisor ran out of them and died, over and over.
          try {
            conn.close();
          } catch {
            // Already closed (close()).
          }
        });
      }
    } catch {
      // Listener closed.
    }
  }

  async #drain(conn: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(256);
    try {
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        // The runner writes nothing but pongs: any byte on its line is an answer.
        if (conn === this.#runner) this.#heardAt = Date.now();
        await new Promise((r) => setTimeout(r, 100));
      }
    } catch {
      // Closed.
    }
  }

  #send(conn: Deno.Conn): void {
    conn.write(STOP).catch(() => {});
  }

  /** Whether a runner has dialled in (within `ms`). */
  async connected(ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const t = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)));
    try {
      return await Promise.race([this.#connected.promise.then(() => true), t]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Asks the runner to stop, now and on any later connection. */
  requestStop(): void {
    this.#stopping = true;
    for (const c of this.#conns) this.#send(c);
  }

  /** Closes the socket and every connection (the runner takes that as a stop too). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#probe);
    closeAll([this.#listener, ...this.#conns]);
    await Deno.remove(this.path).catch(() => {});
  }
}

/**
 * The runner's end: dials the supervisor, answers each `ping` with `pong`, and calls `onStop` on
 * a `stop` line or when the line drops. Resolves once connected, with a closer; rejects when the
 * socket cannot be dialled.
 */
export async function followControl(path: string, onStop: () => void): Promise<() => void> {
  const conn = await Deno.connect({ transport: "unix", path });
  let closed = false;
  (async () => {
    const dec = new TextDecoder();
    let buf = "";
    try {
      reading: for await (const chunk of conn.readable) {
        buf += dec.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line === "stop") break reading;
          if (line === "ping") await conn.write(PONG);
        }
        buf = buf.slice(-64);
      }
    } catch {
      // Dropped.
    }
    if (!closed) onStop();
  })();
  return () => {
    closed = true;
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  };
}
