/**
 * The supervisor's line to one runner: a unix socket the supervisor owns, bound read-only into
 * the sandbox, that the runner dials before it runs any agent code. The supervisor asks the
 * runner to stop by writing `stop` on it; the runner also stops when the line drops (the
 * supervisor is gone). Nothing of it lives where the agent can write, so the agent can neither
 * redirect a stop (a symlink) nor hang one (a FIFO): the file protocol it replaces could be.
 *
 * @module
 */

import { closeAll } from "./close_all.ts";

/** Connections one control socket accepts (the runner's, and room for a reconnect). */
export const MAX_CONTROL_CONNECTIONS = 2;
const STOP = new TextEncoder().encode("stop\n");

/** The supervisor's end. */
export class ControlChannel {
  readonly path: string;
  readonly #listener: Deno.Listener;
  readonly #conns = new Set<Deno.Conn>();
  #stopping = false;
  #closed = false;
  #connected = Promise.withResolvers<void>();

  private constructor(path: string, listener: Deno.Listener) {
    this.path = path;
    this.#listener = listener;
    this.#accept();
  }

  /** Listens on `path` (0600, owned by `owner` when given). */
  static async listen(path: string, owner?: { uid: number; gid: number }): Promise<ControlChannel> {
    await Deno.remove(path).catch(() => {});
    const listener = Deno.listen({ transport: "unix", path });
    await Deno.chmod(path, 0o600);
    if (owner) await Deno.chown(path, owner.uid, owner.gid);
    return new ControlChannel(path, listener);
  }

  async #accept(): Promise<void> {
    try {
      for await (const conn of this.#listener) {
        if (this.#conns.size >= MAX_CONTROL_CONNECTIONS) {
          conn.close();
          continue;
        }
        this.#conns.add(conn);
        this.#connected.resolve();
        if (this.#stopping) this.#send(conn);
        // The runner never writes; what an agent writes is drained slowly (a few KiB/s), so a
        // flood costs the supervisor nothing and blocks only the agent. Its end is still seen.
        this.#drain(conn).finally(() => this.#conns.delete(conn));
      }
    } catch {
      // Listener closed.
    }
  }

  async #drain(conn: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(256);
    try {
      while ((await conn.read(buf)) !== null) await new Promise((r) => setTimeout(r, 100));
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
    closeAll([this.#listener, ...this.#conns]);
    await Deno.remove(this.path).catch(() => {});
  }
}

/**
 * The runner's end: dials the supervisor and calls `onStop` on a `stop` line or when the line
 * drops. Resolves once connected, with a closer; rejects when the socket cannot be dialled.
 */
export async function followControl(path: string, onStop: () => void): Promise<() => void> {
  const conn = await Deno.connect({ transport: "unix", path });
  let closed = false;
  (async () => {
    const dec = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of conn.readable) {
        buf = (buf + dec.decode(chunk, { stream: true })).slice(-64);
        if (buf.includes("stop\n")) break;
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
