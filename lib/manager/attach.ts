/**
 * The manager's side of an attach session: frames from the caller (`in`: ready, bytes, resize,
 * end) drive the agent's terminal; its output (the kept backlog on `ready`, then live) goes out
 * as `b` frames; `end` says why the session closed.
 *
 * @module
 */
import { isBrokerAnswer, newLifecycleUid } from "../wire/mod.ts";
import type { NatsConnection, Subscription } from "nats";
import { CotalError } from "../errors.ts";
import {
  base64ToBytes,
  bytesToBase64,
  decodeFrame,
  encodeFrame,
  type SessionFrame,
  sessionSubject,
} from "./control_rail.ts";
import type { ManagedAgent, OutputSink } from "./managed_agent.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** Live attach sessions a manager holds at most (reference: 64). */
export const MAX_SESSIONS = 64;
/** Output bytes per frame (a frame is base64 JSON, far under the broker's payload limit). */
const FRAME_BYTES = 32 * 1024;

/** What an attach grant tells the caller. */
export interface AttachGrant {
  readonly session: string;
  readonly epoch: string;
  readonly cols: number;
  readonly rows: number;
}

/** The sessions of one manager. */
export class AttachSessions {
  readonly #nc: () => NatsConnection;
  readonly #space: string;
  readonly #epoch: string;
  readonly #live = new Map<string, { sub: Subscription; end: (reason: string) => void }>();

  constructor(nc: () => NatsConnection, space: string, epoch: string) {
    this.#nc = nc;
    this.#space = space;
    this.#epoch = epoch;
  }

  get size(): number {
    return this.#live.size;
  }

  /** Opens a session on `agent`'s terminal. */
  open(agent: ManagedAgent, size?: { cols: number; rows: number }): AttachGrant {
    if (this.#live.size >= MAX_SESSIONS) {
      throw new CotalError(
        "resource_exhausted",
        `This manager already holds ${MAX_SESSIONS} attach sessions; close one first.`,
      );
    }
    if (!agent.handle || agent.status === "retired" || agent.status === "stopping") {
      throw new CotalError(
        "not_running",
        `Agent ${agent.plan.name} has no running terminal (${agent.status}); spawn it again.`,
      );
    }
    const session = newLifecycleUid();
    const out = sessionSubject(this.#space, session, this.#epoch, "out");
    const nc = this.#nc();
    let ready = false;
    const send = (f: SessionFrame) => {
      try {
        nc.publish(out, encodeFrame(f));
      } catch {
        // The connection is closing: the session ends with it.
      }
    };
    const sendBytes = (b: Uint8Array) => {
      for (let i = 0; i < b.length; i += FRAME_BYTES) {
        send({ k: "b", b: bytesToBase64(b.subarray(i, i + FRAME_BYTES)) });
      }
    };
    const sink: OutputSink = {
      data: (d) => {
        if (ready) sendBytes(d);
      },
      end: (reason) => end(reason),
    };
    const end = (reason: string) => {
      const s = this.#live.get(session);
      if (!s) return;
      this.#live.delete(session);
      agent.sinks.delete(sink);
      send({ k: "end", reason });
      s.sub.unsubscribe();
    };
    const sub = nc.subscribe(sessionSubject(this.#space, session, this.#epoch, "in"), {
      callback: (_err, m) => {
        // Only the caller's frames; never a broker answer someone aimed at the session.
        const hdrs = m ? headersOf(m) : undefined;
        const f = m && hdrs !== UNDECODABLE && !isBrokerAnswer(hdrs) && decodeFrame(m.data);
        if (!f) return;
        const h = agent.handle;
        switch (f.k) {
          case "ready":
            if (!ready) {
              ready = true;
              sendBytes(agent.backlog());
            }
            break;
          case "b":
            h?.write(base64ToBytes(f.b));
            break;
          case "resize":
            agent.cols = f.cols;
            agent.rows = f.rows;
            h?.resize(f.cols, f.rows);
            break;
          case "end":
            end("closed");
            break;
        }
      },
    });
    this.#live.set(session, { sub, end });
    agent.sinks.add(sink);
    if (size) {
      agent.cols = size.cols;
      agent.rows = size.rows;
      agent.handle.resize(size.cols, size.rows);
    }
    return { session, epoch: this.#epoch, cols: agent.cols, rows: agent.rows };
  }

  /** Ends every session (manager stop). */
  endAll(reason: string): void {
    for (const s of [...this.#live.values()]) s.end(reason);
  }
}
