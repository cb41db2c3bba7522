/**
 * `CotalEndpoint`: one participant's long-lived connection to a space.
 *
 * Lifecycle: `start()` dials, binds the consumers (before presence, so a wrong lifecycle uid
 * leaves no roster ghost), joins the boot channels and starts the heartbeat. Ordinary blips
 * are npm:nats's own reconnects (subscriptions reopen; a gap fill recovers channel messages
 * sent meanwhile). A terminal close (a credential refused or dead) runs one serialized rebuild
 * with a widening backoff. Credentials are renewed ahead of expiry and swapped onto the live
 * connection with a controlled reconnect.
 *
 * @module
 */

import {
  connect,
  Events,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
} from "nats";
import { CotalError } from "../errors.ts";
import {
  assertFitsPayload,
  buildMessage,
  type CotalMessage,
  encodeMessage,
} from "../wire/envelope.ts";
import {
  assertConcreteChannel,
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidRole,
  hasWildcard,
  parsePrincipalId,
  type Principal,
} from "../wire/names.ts";
import { decodeMessage } from "../wire/receive.ts";
import { bucketNames } from "../wire/resources.ts";
import { chatSubject, instSubject, svcSubject } from "../wire/subjects.ts";
import { ChannelSet } from "./channels.ts";
import { Consumers } from "./consumers.ts";
import {
  CredentialHolder,
  errorText,
  type HeldCredential,
  isDead,
  resolvePrincipal,
} from "./credentials.ts";
import { SeenIds } from "./dedupe.ts";
import { EndpointEvents } from "./emitter.ts";
import {
  ConnectionEvent,
  CotalMessageEvent,
  EndpointErrorEvent,
  EndpointWarningEvent,
  RenewalEvent,
  TransportEvent,
} from "./events.ts";
import { type InboundHost, surfaceCore } from "./inbound.ts";
import { PresenceTracker } from "./presence.ts";
import { openBucket } from "./buckets.ts";
import {
  type AgentCard,
  type EndpointOptions,
  type HistoryOptions,
  type JoinResult,
  type MulticastOptions,
  type Presence,
  type PresenceStatus,
  PROTOCOL_VERSION,
  type SendOptions,
} from "./types.ts";

/** The broker an endpoint dials when `servers` is not given. */
export const DEFAULT_SERVER = "nats://127.0.0.1:4222";
/** First rebuild retry delay; each failure doubles it. */
export const RETRY_BASE_MS = 3_000;
/** Longest rebuild retry delay. */
export const RETRY_CAP_MS = 60_000;
/** How long one publish waits for its stream acknowledgement. */
export const PUBLISH_TIMEOUT_MS = 5_000;
/** Extra publish attempts after a timeout (same msg-id, so the stream drops duplicates). */
export const PUBLISH_RETRIES = 2;
const MAX_NAME_LENGTH = 128;

type State = "idle" | "starting" | "running" | "rebuilding" | "stopped";
interface Conn {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * A Cotal endpoint. Attach `message`, `error` and `warning` listeners before `start()`.
 *
 * @example
 * ```ts
 * const ep = new CotalEndpoint({ servers, space: "demo", card: { name: "alice" }, creds,
 *   lifecycleUid, channels: ["general"] });
 * ep.addEventListener("message", (ev) => console.log(ev.message.parts));
 * await ep.start();
 * await ep.multicast("hello");
 * ```
 */
export class CotalEndpoint extends EndpointEvents {
  /** The space's display name. */
  readonly space: string;
  readonly #opts: EndpointOptions;
  readonly #servers: string[];
  readonly #creds: CredentialHolder;
  readonly #seen = new SeenIds();
  readonly #channels: ChannelSet;
  readonly #presence: PresenceTracker;
  readonly #consumers: Consumers;
  readonly #inbound: InboundHost;
  #card?: AgentCard;
  #principal?: Principal;
  #connId = `ibx${crypto.randomUUID().replaceAll("-", "")}`;
  #conn?: Conn;
  #state: State = "idle";
  #rebuilding?: Promise<void>;
  #wake?: () => void;
  #renewTimer?: ReturnType<typeof setTimeout>;
  #gapSince?: number;
  #status: PresenceStatus = "idle";
  #activity?: string;
  #reconnectWaiters: Array<() => void> = [];
  #attemptWaiters: Array<{ resolve(): void; reject(err: Error): void }> = [];

  constructor(opts: EndpointOptions) {
    super();
    if (typeof opts?.space !== "string" || opts.space.trim() === "") {
      throw new CotalError("invalid_space", "The endpoint needs a space name; pass opts.space.");
    }
    checkCard(opts.card);
    if (opts.lifecycleUid !== undefined) assertValidLifecycleUid(opts.lifecycleUid);
    for (const ch of opts.channels ?? []) assertValidChannel(ch);
    this.space = opts.space;
    this.#opts = { ...opts };
    this.#servers = [opts.servers ?? DEFAULT_SERVER].flat();
    this.#creds = new CredentialHolder(opts);
    this.#inbound = {
      space: opts.space,
      self: () => this.principal,
      seen: this.#seen,
      listening: () => this.listenerCount("message") > 0,
      dispatch: (ev) => this.dispatchEvent(ev),
      error: (err) => this.#error(err),
    };
    this.#channels = new ChannelSet({
      space: opts.space,
      principal: () => this.principal,
      lifecycleUid: opts.lifecycleUid,
      // Also used while a rebuild binds, before the endpoint reports itself running.
      conn: () => this.#conn ?? this.#live(),
      surface: (subject, data, source, seq) =>
        surfaceCore(this.#inbound, subject, data, source, seq),
      error: (err) => this.#error(err),
      warn: (err) => this.#warn(err),
    });
    this.#presence = new PresenceTracker({
      selfKey: () => this.id,
      record: () => this.#record(this.#status),
      dispatch: (ev) => this.dispatchEvent(ev),
      warn: (err) => this.#warn(err),
    }, opts);
    this.#consumers = new Consumers(this.#inbound, (err) => this.#error(err));
  }

  /** The authenticated principal (known once `start()` has loaded the credential). */
  get principal(): Principal {
    if (!this.#principal) {
      throw new CotalError("not_started", "The endpoint has not started; await start() first.");
    }
    return this.#principal;
  }

  /** The dot-form principal `<owner>.<actor>` (also `card.id`). */
  get id(): string {
    const p = this.principal;
    return `${p.owner}.${p.actor}`;
  }

  /** The card as published in presence. */
  get card(): AgentCard {
    if (!this.#card) this.principal;
    return structuredClone(this.#card!);
  }

  /** True while fully bound to a live connection. */
  get connected(): boolean {
    return this.#state === "running" && this.#conn !== undefined;
  }

  /** The broker's `max_payload` in bytes (the message size limit). */
  get maxPayload(): number {
    return this.#live().nc.info?.max_payload ?? 1024 * 1024;
  }

  /** Connect and bind. A first-connect failure is thrown to the caller. */
  async start(): Promise<void> {
    if (this.#state !== "idle") {
      throw new CotalError(
        "already_started",
        "This endpoint was already started; create a new one.",
      );
    }
    this.#state = "starting";
    let nc: NatsConnection | undefined;
    try {
      if (
        typeof this.#opts.bearer === "function" &&
        (this.#opts.card.owner === undefined || this.#opts.card.actor === undefined)
      ) {
        // A renewal source may hand back any principal's bearer: pin the one expected.
        throw new CotalError(
          "missing_principal",
          "A bearer function needs an explicit card.owner and card.actor to pin who it renews for.",
        );
      }
      const cred = await this.#creds.load();
      this.#principal = resolvePrincipal(this.#creds.kind, cred, this.#opts.card);
      if (cred?.connId) this.#connId = cred.connId;
      this.#card = buildCard(this.#opts.card, this.#principal);
      if (this.#opts.consume !== false && this.#opts.lifecycleUid === undefined) {
        throw new CotalError(
          "missing_lifecycle_uid",
          "A consuming endpoint binds its lifecycle's dm_/dlv_ durables; pass lifecycleUid (or consume: false).",
        );
      }
      nc = await this.#dial();
      await this.#bind(nc, true);
      this.#state = "running";
      this.#scheduleRenewal();
    } catch (err) {
      this.#teardown();
      await nc?.close().catch(() => {});
      this.#state = "idle";
      throw err;
    }
  }

  /** Leave: a final `offline` presence row (best effort), then close. */
  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    clearTimeout(this.#renewTimer);
    this.#wake?.();
    await this.#rebuilding?.catch(() => {});
    const conn = this.#conn;
    this.#conn = undefined;
    this.#consumers.stop();
    this.#channels.unbind();
    if (conn && this.#card && this.#opts.registerPresence !== false) {
      await this.#presence.goOffline(this.#record("offline"));
    } else this.#presence.unbind();
    if (conn) {
      await conn.nc.close().catch(() => {});
      this.dispatchEvent(new ConnectionEvent(false));
    }
  }

  /** `await using ep = ...` stops the endpoint on scope exit. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  /**
   * Rebuild the connection now (interrupting a backoff wait). Resolves once rebound; if this
   * attempt fails its error is thrown and the background loop keeps retrying.
   */
  reconnect(): Promise<void> {
    if (this.#state === "idle" || this.#state === "stopped") {
      return Promise.reject(
        new CotalError("not_started", "Only a started endpoint can reconnect."),
      );
    }
    const next = new Promise<void>((resolve, reject) => {
      this.#attemptWaiters.push({ resolve, reject });
    });
    if (this.#state === "running") {
      this.#lost(new CotalError("manual_reconnect", "reconnect() was called."), true);
    } else this.#wake?.();
    return next;
  }

  /** Post to a channel (default: the first concrete boot channel). */
  async multicast(text: string, opts: MulticastOptions = {}): Promise<CotalMessage> {
    const channel = opts.channel ?? this.#defaultChannel();
    assertConcreteChannel(channel);
    const msg = buildMessage({
      ...this.#content(text, opts),
      channel,
      mentions: opts.mentions,
    });
    await this.#publish(chatSubject(this.space, this.principal, channel), msg);
    return msg;
  }

  /** Send a DM to one principal (`<owner>.<actor>`). */
  async unicast(to: string, text: string, opts: SendOptions = {}): Promise<CotalMessage> {
    const recipient = parsePrincipalId(to);
    const msg = buildMessage({
      ...this.#content(text, opts),
      to: `${recipient.owner}.${recipient.actor}`,
    });
    await this.#publish(instSubject(this.space, recipient, this.principal), msg);
    return msg;
  }

  /** Hand a task to whichever holder of `role` takes it first. */
  async anycast(role: string, text: string, opts: SendOptions = {}): Promise<CotalMessage> {
    assertValidRole(role);
    const msg = buildMessage({ ...this.#content(text, opts), toService: role });
    await this.#publish(svcSubject(this.space, role, this.principal), msg);
    return msg;
  }

  /** Join a channel: confirmed subscribe, backfill marked historical, backstop request. */
  joinChannel(channel: string): Promise<JoinResult> {
    this.#live();
    return this.#channels.join(channel);
  }

  /** Leave a channel (fail-closed when a durable backstop was established). */
  leaveChannel(channel: string): Promise<{ left: boolean }> {
    this.#live();
    return this.#channels.leave(channel);
  }

  /** The joined channels. */
  joinedChannels(): string[] {
    return this.#channels.joined();
  }

  /** The newest `limit` (default 100) retained messages of a channel, oldest first. */
  async channelHistory(channel: string, opts: HistoryOptions = {}): Promise<CotalMessage[]> {
    const limit = opts.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit <= 0) {
      throw new CotalError("invalid_limit", "The history limit must be a positive integer.");
    }
    this.#live();
    const items = await this.#channels.history(channel, limit, opts.signal);
    const out: CotalMessage[] = [];
    for (const it of items) {
      const d = decodeHistory(this.space, it.subject, it.data);
      if (d) out.push(d);
    }
    return out;
  }

  /** Online peers (this endpoint included), sorted by name. */
  getRoster(): Presence[] {
    return this.#presence.roster();
  }

  /** Set the presence status (republished now). */
  setStatus(status: Exclude<PresenceStatus, "offline">): void {
    if (!["idle", "waiting", "working"].includes(status)) {
      throw new CotalError("invalid_status", "Status must be idle, waiting or working.");
    }
    this.#status = status;
    void this.#presence.beat();
  }

  /** Set the free-text activity line (republished now). */
  setActivity(activity: string | undefined): void {
    this.#activity = activity;
    void this.#presence.beat();
  }

  protected override listenerFailed(ev: Event): void {
    // A copy whose handler threw must come back, not be acked.
    if (ev instanceof CotalMessageEvent && !ev.delivery.settled) ev.delivery.nak();
  }

  #content(text: string, opts: SendOptions) {
    if (typeof text !== "string") {
      throw new CotalError("invalid_message", "The message text must be a string.");
    }
    const card = this.#card!;
    return {
      space: this.space,
      from: { id: this.id, name: card.name, ...(card.role ? { role: card.role } : {}) },
      text: text === "" && opts.parts?.length ? undefined : text,
      parts: opts.parts,
      replyTo: opts.replyTo,
      contextId: opts.contextId,
    };
  }

  #defaultChannel(): string {
    const ch = [...(this.#opts.channels ?? []), ...this.#channels.joined()].find((c) =>
      !hasWildcard(c)
    );
    if (!ch) {
      throw new CotalError(
        "no_default_channel",
        "multicast() was called without a channel and no concrete channel is joined; pass opts.channel.",
      );
    }
    return ch;
  }

  async #publish(subject: string, msg: CotalMessage): Promise<void> {
    const body = encodeMessage(msg);
    assertFitsPayload(msg, this.maxPayload, body);
    this.#seen.check(msg.id);
    for (let attempt = 0;; attempt++) {
      const { js } = this.#live();
      try {
        await js.publish(subject, body, { msgID: msg.id, timeout: PUBLISH_TIMEOUT_MS });
        return;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === "PERMISSIONS_VIOLATION") {
          throw new CotalError(
            "permission_denied",
            `The broker refused the publish to ${subject}: it is outside this credential's publish grant (allowPublish for channels).`,
            { cause: err },
          );
        }
        // A retry carries the same msg-id: the stream drops it if the first one landed.
        if (attempt < PUBLISH_RETRIES && (code === "TIMEOUT" || code === "503")) {
          await this.#transportUp(PUBLISH_TIMEOUT_MS);
          continue;
        }
        throw new CotalError(
          "publish_failed",
          `The broker did not confirm the publish to ${subject} (${
            errorText(err)
          }); the stream may be missing or the broker unreachable, retry later.`,
          { cause: err },
        );
      }
    }
  }

  #live(): Conn {
    if (this.#conn && (this.#state === "running" || this.#state === "starting")) return this.#conn;
    if (this.#state === "rebuilding") {
      throw new CotalError("reconnecting", "The endpoint is reconnecting - try again shortly.");
    }
    throw new CotalError(
      this.#state === "stopped" ? "stopped" : "not_started",
      this.#state === "stopped"
        ? "The endpoint was stopped; create a new one."
        : "The endpoint has not started; await start() first.",
    );
  }

  async #dial(): Promise<NatsConnection> {
    try {
      return await connect({
        servers: this.#servers,
        authenticator: this.#creds.authenticator(),
        inboxPrefix: `_INBOX_${this.#connId}`,
        // In user mode the callout keys the reply inbox on the connection name.
        name: this.#creds.kind === "bearer" ? this.#connId : `cotal:${this.#card!.name}`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 1_000,
      });
    } catch (err) {
      if (err instanceof CotalError) throw err;
      const auth = /authorization|authentication/i.test(errorText(err));
      throw new CotalError(
        auth ? "broker_refused_credential" : "broker_connect_failed",
        auth
          ? `The broker refused this endpoint's credential (${
            errorText(err)
          }); re-mint it for this broker and space.`
          : `Could not reach ${this.#servers.join(", ")} (${
            errorText(err)
          }); check the broker is running.`,
        { cause: err },
      );
    }
  }

  async #bind(nc: NatsConnection, boot: boolean): Promise<void> {
    const conn: Conn = {
      nc,
      js: nc.jetstream(),
      jsm: await nc.jetstreamManager({ checkAPI: false }),
    };
    this.#conn = conn;
    this.#watch(nc);
    const names = bucketNames(this.space);
    await this.#channels.watchRegistry(
      await openBucket(conn.js, conn.jsm, names.channels, (e) => this.#warn(e)),
    );
    // Consumers before presence: a wrong lifecycle uid fails here, with no roster ghost.
    if (this.#opts.consume !== false) {
      await this.#consumers.bind(conn.js, {
        principal: this.principal,
        lifecycleUid: this.#opts.lifecycleUid!,
        role: this.#card!.role,
      });
    }
    if (boot) { for (const ch of this.#opts.channels ?? []) await this.#channels.join(ch); }
    else await this.#channels.resubscribe();
    const watch = this.#opts.watchPresence !== false;
    const register = this.#opts.registerPresence !== false;
    if (watch || register) {
      const kv = await openBucket(conn.js, conn.jsm, names.presence, (e) => this.#warn(e));
      if (kv) await this.#presence.bind(kv, { watch, register });
    }
    this.dispatchEvent(new ConnectionEvent(true));
  }

  #watch(nc: NatsConnection): void {
    (async () => {
      for await (const s of nc.status()) {
        if (this.#conn?.nc !== nc) return;
        if (s.type === Events.Disconnect) {
          this.#gapSince ??= Date.now();
          this.dispatchEvent(new TransportEvent(false, String(s.data)));
        } else if (s.type === Events.Reconnect) {
          this.dispatchEvent(new TransportEvent(true, String(s.data)));
          for (const w of this.#reconnectWaiters.splice(0)) w();
          const since = this.#gapSince;
          this.#gapSince = undefined;
          void this.#presence.beat();
          if (since !== undefined) void this.#channels.gapFill(since);
        } else if (s.type === Events.Error && s.permissionContext?.operation === "publish") {
          this.#error(
            new CotalError(
              "permission_denied",
              `The broker denied a publish to ${s.permissionContext.subject} (denied, not absent).`,
            ),
          );
        }
      }
    })().catch(() => {});
    nc.closed().then((err) => {
      if (this.#conn?.nc === nc && this.#state === "running") this.#lost(err);
    });
  }

  #lost(err: unknown, immediate = false): void {
    this.#gapSince ??= Date.now();
    const conn = this.#conn;
    this.#teardown();
    void conn?.nc.close().catch(() => {});
    this.dispatchEvent(new ConnectionEvent(false));
    this.#state = "rebuilding";
    const e = err instanceof CotalError ? err : new CotalError(
      "connection_lost",
      `The broker connection closed (${err ? errorText(err) : "no error"}); rebuilding it.`,
    );
    this.#rebuilding ??= this.#rebuild(e, immediate).finally(() => (this.#rebuilding = undefined));
  }

  #teardown(): void {
    this.#conn = undefined;
    this.#consumers.stop();
    this.#channels.unbind();
    this.#presence.unbind();
    for (const w of this.#reconnectWaiters.splice(0)) w();
  }

  /** The one serialized rebuild: retry with a widening backoff until bound or stopped. */
  async #rebuild(cause: CotalError, immediate: boolean): Promise<void> {
    let failures = 0;
    let err: CotalError = cause;
    let wait = !immediate;
    while (this.#state === "rebuilding") {
      if (wait) {
        const delay = Math.min(RETRY_BASE_MS * 2 ** failures, RETRY_CAP_MS);
        this.#warn(err, delay);
        await this.#sleep(delay);
        if (this.#state !== "rebuilding") break;
        failures++;
      }
      wait = true;
      let nc: NatsConnection | undefined;
      try {
        await this.#freshCredential();
        nc = await this.#dial();
        await this.#bind(nc, false);
        this.#state = "running";
        this.#scheduleRenewal();
        const since = this.#gapSince;
        this.#gapSince = undefined;
        if (since !== undefined) void this.#channels.gapFill(since);
        for (const w of this.#attemptWaiters.splice(0)) w.resolve();
        return;
      } catch (e) {
        this.#teardown();
        await nc?.close().catch(() => {});
        err = e instanceof CotalError ? e : new CotalError(
          "reconnect_failed",
          `Rebuilding the connection failed (${errorText(e)}); retrying.`,
          { cause: e },
        );
        for (const w of this.#attemptWaiters.splice(0)) w.reject(err);
      }
    }
    const stopped = new CotalError("stopped", "The endpoint was stopped while reconnecting.");
    for (const w of this.#attemptWaiters.splice(0)) w.reject(stopped);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.#wake = done;
    });
  }

  async #freshCredential(): Promise<void> {
    const c = this.#creds.current;
    if (!c || !isDead(c)) return;
    if (!this.#creds.renewable) throw this.#creds.deadError(c);
    const next = await this.#creds.fetch();
    this.#creds.adopt(next);
    this.#renewed(next);
  }

  #scheduleRenewal(): void {
    clearTimeout(this.#renewTimer);
    const at = this.#creds.renewAt();
    if (at === undefined) return;
    this.#renewTimer = setTimeout(() => void this.#renew(), at - Date.now());
  }

  async #renew(): Promise<void> {
    if (this.#state !== "running") return;
    try {
      const next = await this.#creds.fetch();
      const cur = this.#creds.current;
      if (next.expiresAt !== undefined && (cur?.expiresAt ?? Infinity) >= next.expiresAt) {
        throw new CotalError(
          "renewal_not_newer",
          `The ${this.#creds.kind} renewal function returned a credential that expires no later than the live one.`,
        );
      }
      await this.#preflight(next);
      this.#creds.adopt(next);
      // The broker only checks a JWT at connect: reconnect now so the new one is presented.
      const nc = this.#conn?.nc;
      if (nc && this.#state === "running") {
        const up = this.#transportUp(10_000);
        await nc.reconnect();
        await up;
      }
      this.#renewed(next);
      if (this.#state === "running") this.#scheduleRenewal();
    } catch (err) {
      const at = this.#creds.retryAt();
      this.#warn(
        err instanceof CotalError
          ? err
          : new CotalError("renewal_failed", `Credential renewal failed (${errorText(err)}).`),
        at - Date.now(),
      );
      clearTimeout(this.#renewTimer);
      this.#renewTimer = setTimeout(() => void this.#renew(), at - Date.now());
    }
  }

  async #preflight(cred: HeldCredential): Promise<void> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: this.#servers,
        authenticator: this.#creds.authenticatorFor(cred),
        inboxPrefix: `_INBOX_${this.#connId}`,
        name: this.#creds.kind === "bearer" ? this.#connId : "cotal-preflight",
        maxReconnectAttempts: 0,
        timeout: 4_000,
      });
    } catch (err) {
      throw new CotalError(
        "renewal_refused",
        `The broker refused the renewed ${this.#creds.kind} on a test connection (${
          errorText(err)
        }); the live connection keeps the current one.`,
        { cause: err },
      );
    }
    await nc.close().catch(() => {});
  }

  #renewed(cred: HeldCredential): void {
    const kind = this.#creds.kind === "bearer" ? "bearer" : "creds";
    this.dispatchEvent(new RenewalEvent(kind, cred.expiresAt ?? Infinity));
  }

  #transportUp(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      this.#reconnectWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  #record(status: PresenceStatus): Presence {
    return {
      card: this.#card!,
      status,
      ...(this.#activity !== undefined ? { activity: this.#activity } : {}),
      ...(this.#opts.lifecycleUid ? { lifecycleUid: this.#opts.lifecycleUid } : {}),
      ts: Date.now(),
    };
  }

  #warn(err: CotalError, retryInMs?: number): void {
    this.dispatchEvent(new EndpointWarningEvent(err, retryInMs));
  }

  #error(err: CotalError): void {
    this.dispatchEvent(new EndpointErrorEvent(err));
  }
}

function checkCard(card: EndpointOptions["card"]): void {
  const name = card?.name;
  if (
    typeof name !== "string" || name === "" || name.length > MAX_NAME_LENGTH ||
    name.includes("/") || name.trim() !== name
  ) {
    throw new CotalError(
      "invalid_card",
      `The card name must be 1-${MAX_NAME_LENGTH} characters with no "/" and no surrounding whitespace.`,
    );
  }
  if (card.role !== undefined) assertValidRole(card.role);
  if (card.kind !== undefined && card.kind !== "agent" && card.kind !== "endpoint") {
    throw new CotalError("invalid_card", 'The card kind must be "agent" or "endpoint".');
  }
}

function buildCard(input: EndpointOptions["card"], p: Principal): AgentCard {
  return {
    ...structuredClone(input),
    id: `${p.owner}.${p.actor}`,
    owner: p.owner,
    actor: p.actor,
    kind: input.kind ?? "agent",
    protocolVersion: PROTOCOL_VERSION,
  };
}

/** History gets the same receive rules as live copies: surfaced, never trusted more. */
function decodeHistory(space: string, subject: string, data: Uint8Array): CotalMessage | undefined {
  const d = decodeMessage(subject, data, { space });
  return d.ok ? d.message : undefined;
}
