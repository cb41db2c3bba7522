/**
 * The one way Cotal dials NATS: npm:nats's `connect`, with its sockets guarded.
 *
 * npm:nats's Node transport strips every listener from a socket when it tears a connection down
 * (a refused credential, a close) and then destroys it; under Deno the socket's read of the
 * broker's reset can land after that, and an `error` event with no listener is thrown as an
 * uncaught `ECONNRESET` that kills the process (measured: 3 of 3 runs of 100 refused connects).
 * The guard drops exactly those events, on sockets that no longer have any error listener, and
 * counts them; an error on a socket anyone still listens to is delivered as before.
 *
 * @module
 */
import { connect as natsConnect, type ConnectionOptions, type NatsConnection } from "nats";
import net from "node:net";

let installed = false;
let dropped = 0;

/** How many late socket errors the guard dropped in this process (for tests and logs). */
export function droppedSocketErrors(): number {
  return dropped;
}

type Emit = (this: net.Socket, event: string | symbol, ...args: unknown[]) => boolean;

function guardSockets(): void {
  if (installed) return;
  installed = true;
  const create = net.createConnection as (...args: unknown[]) => net.Socket;
  (net as unknown as { createConnection: typeof create }).createConnection = function (
    this: unknown,
    ...args: unknown[]
  ): net.Socket {
    const socket = create.apply(this, args);
    const emit = socket.emit as Emit;
    socket.emit = function (this: net.Socket, event: string | symbol, ...rest: unknown[]) {
      if (event === "error" && this.listenerCount("error") === 0) {
        dropped++;
        return false;
      }
      return emit.call(this, event, ...rest);
    } as typeof socket.emit;
    return socket;
  };
}

/** npm:nats's `connect`, after installing the socket guard (once per process). */
export function connect(opts: ConnectionOptions): Promise<NatsConnection> {
  guardSockets();
  return natsConnect(opts);
}

/**
 * Whether `nc`'s broker answers one round trip within `ms`: a broker that accepted the socket
 * and then froze never answers a flush, and npm:nats's flush has no deadline of its own.
 */
export async function flushWithin(nc: NatsConnection, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      nc.flush().then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Options of {@linkcode connectWhenUp}. */
export interface WaitOptions {
  /** Told once when the broker is not up, and every 30 s while it stays down. */
  waiting?: (why: string) => void;
  /** First wait between dials (default 250 ms); doubles up to `capMs`. */
  baseMs?: number;
  /** Longest wait between dials (default 5 s). */
  capMs?: number;
  /** Ends the wait (the last failure is thrown). */
  signal?: AbortSignal;
}

/**
 * `connect`, waiting for a broker that is not up yet however long it takes (a daemon started
 * before its broker, or while the broker restarts). A refusal of the credential is not waited
 * out: it is thrown at once, like any error once `signal` ends the wait.
 */
export async function connectWhenUp(
  opts: ConnectionOptions,
  wait: WaitOptions = {},
): Promise<NatsConnection> {
  const base = wait.baseMs ?? 250;
  const cap = wait.capMs ?? 5_000;
  let told = 0;
  for (let failures = 0;; failures++) {
    try {
      return await connect(opts);
    } catch (err) {
      const text = String((err as Error)?.message ?? err);
      if (/authori[sz]ation|authentication|permission/i.test(text) || wait.signal?.aborted) {
        throw err;
      }
      if (Date.now() - told >= 30_000) {
        wait.waiting?.(text);
        told = Date.now();
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.min(base * 2 ** failures, cap));
        wait.signal?.addEventListener("abort", done, { once: true });
        function done() {
          clearTimeout(t);
          wait.signal?.removeEventListener("abort", done);
          resolve();
        }
      });
    }
  }
}
