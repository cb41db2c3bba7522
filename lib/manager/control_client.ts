/**
 * The caller's side of the manager's control rail: one connection with a `control-caller`
 * credential, one subscription on its own reply rail, requests matched to replies by nonce, and
 * attach sessions over the session frames.
 *
 * @module
 */
import type { NatsConnection, Subscription } from "nats";
import { connect, decodeJwtUnverified, flushWithin, parseCreds } from "../nats/mod.ts";
import { codeFrom, CotalError } from "../errors.ts";
import { credsAuthenticatorFast, principalFromTags } from "../trust/mod.ts";
import { type ControlProver, controlProver, proveControlRequest } from "./control_auth.ts";
import { errorText, newLifecycleUid, type Principal } from "../wire/mod.ts";
import {
  base64ToBytes,
  bytesToBase64,
  CONTROL_VERSION,
  type ControlCaller,
  decodeFrame,
  decodeReply,
  encodeEnvelope,
  encodeFrame,
  newNonce,
  replyFilter,
  requestSubject,
  sessionSubject,
} from "./control_rail.ts";
import { READ_ONLY_COMMANDS } from "./control_server.ts";

/** How long a request waits for its reply unless told otherwise. */
export const DEFAULT_CONTROL_TIMEOUT_MS = 10_000;
/**
 * Read-only commands are re-sent (same nonce) on silence this often within their deadline: a
 * request published while the manager's connection was down (a broker config reload drops
 * every client on nats-server 2.10) has no subscriber and is lost.
 */
export const READ_RESEND_MS = 1_000;
/**
 * Commands with effects are re-sent (same nonce, fresh proof) on silence this often: one sent
 * to a supervisor that froze, or that was killed and is coming back, was lost with it. The
 * supervisor runs each nonce once and answers every copy with its reply (`ReplyCache`), and a
 * spawn its predecessor took is found on the roster, not started twice.
 */
export const EFFECT_RESEND_MS = 3_000;
/**
 * The commands with effects that are re-sent. Not `input`: the supervisor's memory of a nonce
 * dies with it, so a copy that reaches its successor runs again (red team 25), and keys typed
 * twice into an agent are worse than a refusal the operator can retype. A spawn is found on
 * the successor's roster; a despawn run twice is told the agent is gone.
 */
const RESENT_EFFECTS: ReadonlySet<string> = new Set(["spawn", "despawn", "attach"]);
const READ_COMMANDS = READ_ONLY_COMMANDS;

/** How long a connect, and its first round trip, may take (frozen). */
const CONNECT_DEADLINE_MS = 5_000;

/** Options of {@linkcode ManagerClient.connect}. */
export interface ManagerClientOptions {
  readonly servers: string | readonly string[];
  readonly space: string;
  /** `control-caller` creds text; the caller principal is read from its tags. */
  readonly creds: string;
  /** Pin one manager instance; default: whichever instance of the class answers. */
  readonly instanceId?: string;
}

/** What an attach session gives its user. */
export interface AttachSession {
  /** The terminal size the manager reported. */
  readonly cols: number;
  readonly rows: number;
  /** Resolves with the reason when the session ends (process-exit, closed, despawn, ...). */
  readonly ended: Promise<string>;
  write(data: string | Uint8Array): void;
  resize(cols: number, rows: number): void;
  close(): Promise<void>;
}

interface Pending {
  resolve(data: unknown): void;
  reject(err: CotalError): void;
  timer: ReturnType<typeof setTimeout>;
}

async function callerOf(creds: string): Promise<Principal & { nkey: string }> {
  const { jwt } = await parseCreds(creds);
  const claims = decodeJwtUnverified(jwt);
  const caller = principalFromTags(claims.nats.tags);
  if (!caller) {
    throw new CotalError(
      "invalid_caller",
      "The control creds name no owner and actor; mint them with the control-caller profile.",
    );
  }
  return { ...caller, nkey: claims.sub };
}

/** A connection to a space's manager over the control rail. */
export class ManagerClient {
  readonly space: string;
  readonly caller: ControlCaller;
  readonly #nc: NatsConnection;
  readonly #instanceId?: string;
  readonly #pending = new Map<string, Pending>();
  readonly #sub: Subscription;
  readonly #prover: ControlProver;

  private constructor(
    nc: NatsConnection,
    space: string,
    caller: ControlCaller,
    prover: ControlProver,
    instanceId?: string,
  ) {
    this.#nc = nc;
    this.#prover = prover;
    this.space = space;
    this.caller = caller;
    this.#instanceId = instanceId;
    this.#sub = nc.subscribe(replyFilter(space, caller), {
      callback: (_err, m) => {
        if (!m) return;
        let reply;
        try {
          reply = decodeReply(m.data);
        } catch {
          return;
        }
        // The nonce is the subject's last token: only a reply to our own subject counts.
        const nonce = m.subject.slice(m.subject.lastIndexOf(".") + 1);
        const p = this.#pending.get(nonce);
        if (!p || reply.id !== nonce) return;
        this.#pending.delete(nonce);
        clearTimeout(p.timer);
        if (reply.ok) p.resolve(reply.data);
        else {p.reject(
            new CotalError(codeFrom(reply.error.code, "remote_failed"), reply.error.message),
          );}
      },
    });
  }

  /** Connects with control-caller creds and subscribes the reply rail. */
  static async connect(opts: ManagerClientOptions): Promise<ManagerClient> {
    const who = await callerOf(opts.creds);
    const prover = await controlProver(opts.creds);
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: [opts.servers].flat() as string[],
        authenticator: credsAuthenticatorFast(opts.creds),
        inboxPrefix: `_INBOX_${who.nkey}`,
        name: "cotal control",
        maxReconnectAttempts: 3,
        // A broker that accepts the socket but never speaks (frozen) is refused in 5 s.
        timeout: CONNECT_DEADLINE_MS,
      });
    } catch (err) {
      throw new CotalError(
        "broker_connect_failed",
        `Could not reach the broker at ${[opts.servers].flat().join(", ")} (${
          errorText(err)
        }); check the mesh is up.`,
      );
    }
    const client = new ManagerClient(
      nc,
      opts.space,
      { owner: who.owner, actor: who.actor, uid: newLifecycleUid() },
      prover,
      opts.instanceId,
    );
    // The first round trip has the same deadline: a broker that froze after its INFO.
    if (!(await flushWithin(nc, CONNECT_DEADLINE_MS))) {
      await nc.close().catch(() => {});
      throw new CotalError(
        "broker_unresponsive",
        `The broker at ${[opts.servers].flat().join(", ")} accepted the connection but did not ` +
          `answer within ${CONNECT_DEADLINE_MS / 1000} s; check that nats-server is not hung ` +
          `('cotal status').`,
      );
    }
    return client;
  }

  /**
   * Sends one command and resolves with the reply's data; a refusal rejects with the
   * manager's code and message, silence with `manager_unavailable`.
   */
  request<T = unknown>(
    command: string,
    args: Record<string, unknown> = {},
    opts: { timeoutMs?: number } = {},
  ): Promise<T> {
    const nonce = newNonce();
    const subject = requestSubject(this.space, command, this.caller, nonce, this.#instanceId);
    const body = encodeEnvelope({ v: CONTROL_VERSION, id: nonce, command, args });
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CONTROL_TIMEOUT_MS;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.get(nonce)?.reject(
          new CotalError(
            "manager_unavailable",
            `No manager of space '${this.space}' answered '${command}' within ${
              Math.round(timeoutMs / 1000)
            } s; check that cotal-supervise runs for this space.`,
          ),
        );
      }, timeoutMs);
      // Each copy signed afresh: a long deadline outlasts the proof's window.
      const send = () => {
        proveControlRequest(this.#prover, subject, body)
          .then((headers) => this.#nc.publish(subject, body, { headers })).catch(() => {
            // Closed: the timer reports it.
          });
      };
      const resend = READ_COMMANDS.has(command)
        ? setInterval(send, READ_RESEND_MS)
        : RESENT_EFFECTS.has(command)
        ? setInterval(send, EFFECT_RESEND_MS)
        : undefined;
      const done = () => {
        this.#pending.delete(nonce);
        clearTimeout(timer);
        clearInterval(resend);
      };
      this.#pending.set(nonce, {
        resolve: (d) => {
          done();
          resolve(d as T);
        },
        reject: (e) => {
          done();
          reject(e);
        },
        timer,
      });
      send();
    });
  }

  /**
   * Opens an attach session to an agent's terminal: `onData` gets its output (the manager's
   * backlog first), `write` types into it, `resize` changes its size.
   */
  async attach(
    name: string,
    onData: (bytes: Uint8Array) => void,
    opts: { cols?: number; rows?: number; timeoutMs?: number } = {},
  ): Promise<AttachSession> {
    const grant = await this.request<
      { session: string; epoch: string; cols: number; rows: number }
    >(
      "attach",
      { name, ...(opts.cols ? { cols: opts.cols, rows: opts.rows } : {}) },
      { timeoutMs: opts.timeoutMs },
    );
    const inSubject = sessionSubject(this.space, grant.session, grant.epoch, "in");
    const ended = Promise.withResolvers<string>();
    let done = false;
    const finish = (reason: string) => {
      if (done) return;
      done = true;
      sub.unsubscribe();
      ended.resolve(reason);
    };
    const sub = this.#nc.subscribe(
      sessionSubject(this.space, grant.session, grant.epoch, "out"),
      {
        callback: (_err, m) => {
          const f = m && decodeFrame(m.data);
          if (!f) return;
          if (f.k === "b") onData(base64ToBytes(f.b));
          else if (f.k === "end") finish(f.reason || "ended");
        },
      },
    );
    await this.#nc.flush();
    const send = (f: Parameters<typeof encodeFrame>[0]) => {
      if (!done) this.#nc.publish(inSubject, encodeFrame(f));
    };
    send({ k: "ready" });
    const enc = new TextEncoder();
    return {
      cols: grant.cols,
      rows: grant.rows,
      ended: ended.promise,
      write: (data) =>
        send({ k: "b", b: bytesToBase64(typeof data === "string" ? enc.encode(data) : data) }),
      resize: (cols, rows) => send({ k: "resize", cols, rows }),
      close: async () => {
        send({ k: "end", reason: "closed" });
        await this.#nc.flush().catch(() => {});
        finish("closed");
      },
    };
  }

  /** Closes the connection; pending requests reject with `manager_unavailable`. */
  async close(): Promise<void> {
    for (const [nonce, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new CotalError("manager_unavailable", "The control connection was closed."));
      this.#pending.delete(nonce);
    }
    this.#sub.unsubscribe();
    await this.#nc.close().catch(() => {});
  }

  /** `await using` closes the client. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
