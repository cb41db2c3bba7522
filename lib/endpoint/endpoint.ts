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

import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import {
  assertFitsPayload,
  type CotalMessage,
  encodeMessage,
  lifecycleTag,
  type Principal,
} from "../wire/mod.ts";
import { Sleeper, Waiters } from "./backoff.ts";
import { bindConnection, type Conn } from "./bind.ts";
import { buildCard, checkOptions } from "./card.ts";
import { ChannelSet } from "./channels.ts";
import { Consumers } from "./consumers.ts";
import { CredentialHolder, errorText, loadIdentity } from "./credentials.ts";
import { SeenIds, seenKey } from "./dedupe.ts";
import { dial } from "./dial.ts";
import { EndpointEvents } from "./emitter.ts";
import {
  ConnectionEvent,
  CotalMessageEvent,
  EndpointErrorEvent,
  EndpointWarningEvent,
  TransportEvent,
} from "./events.ts";
import { type InboundHost, surfaceCore } from "./inbound.ts";
import { outgoing, type Route } from "./outgoing.ts";
import { PresenceTracker } from "./presence.ts";
import { notStartedError, rebuildUntilBound, stoppedError } from "./rebuild.ts";
import { publishEnvelope } from "./publish.ts";
import { Renewal } from "./renewal.ts";
import { watchConnection } from "./status.ts";
import type {
  AgentCard,
  EndpointOptions,
  HistoryOptions,
  JoinResult,
  MulticastOptions,
  Presence,
  PresenceStatus,
  SendOptions,
} from "./types.ts";
import { HeldMessages } from "./held.ts";
export { HELD_BYTES, HELD_MESSAGES } from "./held.ts";

/** The broker an endpoint dials when `servers` is not given. */
export const DEFAULT_SERVER = "nats://127.0.0.1:4222";

type State = "idle" | "starting" | "running" | "rebuilding" | "stopped";

/**
 * A Cotal endpoint. Attach `message`, `error` and `warning` listeners before `start()`. Channel
 * messages that come while no `message` listener is attached wait for the first one (up to
 * {@linkcode HELD_MESSAGES}); DMs, tasks and durable copies wait on the broker.
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
  readonly #renewal: Renewal;
  readonly #inbound: InboundHost;
  #card?: AgentCard;
  #principal?: Principal;
  #connId = `ibx${crypto.randomUUID().replaceAll("-", "")}`;
  #conn?: Conn;
  #state: State = "idle";
  #rebuilding?: Promise<void>;
  readonly #sleeper = new Sleeper();
  #gapSince?: number;
  #status: PresenceStatus = "idle";
  #activity?: string;
  /** Channel copies that came before any `message` listener, oldest first, and their ids. */
  readonly #held = new HeldMessages((err) => this.#warn(err));
  /** Callers waiting for the library's next reconnect (a swap, a publish retry). */
  readonly #reconnected = new Waiters();
  /** Callers of reconnect() waiting for the next rebuild attempt's outcome. */
  readonly #attempts = new Waiters();

  /** An endpoint for one agent; nothing connects until `start()`. */
  constructor(opts: EndpointOptions) {
    super();
    checkOptions(opts);
    this.space = opts.space;
    this.#opts = { ...opts };
    this.#servers = [opts.servers ?? DEFAULT_SERVER].flat();
    this.#creds = new CredentialHolder(opts);
    this.#inbound = {
      space: opts.space,
      self: () => this.principal,
      seen: this.#seen,
      dedupeDurable: opts.dedupeDurable ?? true,
      listening: () => this.listenerCount("message") > 0,
      dispatch: (ev) => this.dispatchEvent(ev),
      hold: (ev, bytes) => this.#held.hold(ev, bytes),
      error: (err) => this.#error(err),
    };
    this.#channels = new ChannelSet({
      space: opts.space,
      principal: () => this.principal,
      lifecycleUid: opts.lifecycleUid,
      // Also used while a rebuild binds, before the endpoint reports itself running.
      conn: () => this.#conn ?? this.#live(),
      surface: (subject, data, source, seq, headers) =>
        surfaceCore(this.#inbound, subject, data, source, seq, headers),
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
    this.#renewal = new Renewal({
      creds: this.#creds,
      servers: this.#servers,
      connId: () => this.#connId,
      live: () => this.#state === "running" ? this.#conn?.nc : undefined,
      transportUp: (ms) => this.#reconnected.wait(ms),
      warn: (err, retryInMs) => this.#warn(err, retryInMs),
      renewed: (ev) => this.dispatchEvent(ev),
    });
  }

  /** The authenticated principal (known once `start()` has loaded the credential). */
  get principal(): Principal {
    if (!this.#principal) throw notStartedError();
    return this.#principal;
  }

  /** The dot-form principal `<owner>.<actor>` (also `card.id`). */
  get id(): string {
    const p = this.principal;
    return `${p.owner}.${p.actor}`;
  }

  /** The card as published in presence. */
  get card(): AgentCard {
    if (!this.#card) throw notStartedError();
    return structuredClone(this.#card);
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
    try {
      const { principal, connId } = await loadIdentity(this.#creds, this.#opts);
      this.#principal = principal;
      if (connId) this.#connId = connId;
      this.#card = buildCard(this.#opts.card, principal);
      if (this.#opts.consume !== false && this.#opts.lifecycleUid === undefined) {
        throw new CotalError(
          "missing_lifecycle_uid",
          "A consuming endpoint binds its lifecycle's dm_/dlv_ durables; pass lifecycleUid (or consume: false).",
        );
      }
      await this.#bringUp("starting", true);
    } catch (err) {
      if (this.#state === "starting") this.#state = "idle";
      throw err;
    }
  }

  /** Leave: a final `offline` presence row (best effort), then close. */
  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    this.#renewal.cancel();
    this.#sleeper.wake();
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
    if (this.#state !== "running" && this.#state !== "rebuilding") {
      return Promise.reject(
        new CotalError("not_started", "Only a started endpoint can reconnect."),
      );
    }
    const next = this.#attempts.wait();
    if (this.#state === "running") {
      this.#lost(new CotalError("manual_reconnect", "reconnect() was called."), true);
    } else this.#sleeper.wake();
    return next;
  }

  /** Post to a channel (default: the first concrete boot channel). */
  async multicast(text: string, opts: MulticastOptions = {}): Promise<CotalMessage> {
    const channel = opts.channel ?? this.#channels.defaultChannel(this.#opts.channels ?? []);
    return await this.#send({ channel, mentions: opts.mentions }, text, opts);
  }

  /** Send a DM to one principal (`<owner>.<actor>`). */
  async unicast(to: string, text: string, opts: SendOptions = {}): Promise<CotalMessage> {
    return await this.#send({ to }, text, opts);
  }

  /** Hand a task to whichever holder of `role` takes it first. */
  async anycast(role: string, text: string, opts: SendOptions = {}): Promise<CotalMessage> {
    return await this.#send({ toService: role }, text, opts);
  }

  /**
   * Whether a DM to `to` (`<owner>.<actor>`), or a task to `role`, would be kept: the broker
   * acknowledges one to a principal with no live lifecycle, or a role nobody was given, and
   * keeps nothing. Asked of the space's delivery daemon; undefined when it does not answer.
   *
   * @example
   * ```ts
   * if (await ep.recipientKnown({ to: "local.bob" }) === false) console.log("no such peer");
   * ```
   */
  async recipientKnown(target: { to: string } | { role: string }): Promise<boolean | undefined> {
    this.#live();
    return await this.#channels.recipientKnown(target);
  }

  /** Join a channel: confirmed subscribe, backfill marked historical, backstop request. */
  async joinChannel(channel: string): Promise<JoinResult> {
    this.#live();
    return await this.#channels.join(channel);
  }

  /** Leave a channel (fail-closed when a durable backstop was established). */
  async leaveChannel(channel: string): Promise<{ left: boolean }> {
    this.#live();
    return await this.#channels.leave(channel);
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
    return await this.#channels.history(channel, limit, opts.signal);
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

  /** The first `message` listener gets what came before it, in arrival order. */
  protected override listenerAdded(type: string): void {
    if (type !== "message" || !this.#held.size) return;
    const listening = () => this.listenerCount("message") > 0;
    // A copy that came again meanwhile (its durable copy, to a listener) is not repeated.
    const deliver = (ev: CotalMessageEvent) =>
      this.#seen.check(seenKey(ev.message)) || this.dispatchEvent(ev);
    queueMicrotask(() => this.#held.releaseTo(listening, deliver));
  }

  /** A listener that threw: reported as a warning, never fatal to the endpoint. */
  protected override listenerFailed(ev: Event): void {
    // A copy whose handler threw must come back, not be acked.
    if (ev instanceof CotalMessageEvent && !ev.delivery.settled) ev.delivery.nak();
  }

  async #send(route: Route, text: string, opts: SendOptions): Promise<CotalMessage> {
    const { subject, msg } = outgoing(
      { space: this.space, principal: this.principal, card: this.#card! },
      route,
      text,
      opts,
    );
    const body = encodeMessage(msg);
    assertFitsPayload(msg, this.maxPayload, body);
    // Our own copy never surfaces back (the echo rule), and a retry keeps the same id.
    this.#seen.check(seenKey(msg));
    const js = () => this.#live().js;
    await publishEnvelope(js, subject, body, msg.id, (ms) => this.#reconnected.wait(ms));
    return msg;
  }

  #live(): Conn {
    if (this.#conn && (this.#state === "running" || this.#state === "starting")) return this.#conn;
    if (this.#state === "rebuilding") {
      throw new CotalError("reconnecting", "The endpoint is reconnecting - try again shortly.");
    }
    throw this.#state === "stopped" ? stoppedError() : notStartedError();
  }

  #dial(): Promise<NatsConnection> {
    return dial({
      servers: this.#servers,
      authenticator: this.#creds.authenticator(),
      connId: this.#connId,
      // In user mode the callout keys the reply inbox on the connection name.
      name: this.#creds.kind === "bearer" ? this.#connId : `cotal:${this.#card!.name}`,
      live: true,
    });
  }

  async #bind(nc: NatsConnection, boot: boolean): Promise<void> {
    await bindConnection(nc, boot, {
      space: this.space,
      opts: this.#opts,
      principal: this.principal,
      role: this.#card!.role,
      channels: this.#channels,
      consumers: this.#consumers,
      presence: this.#presence,
      adopt: (conn) => {
        this.#conn = conn;
        this.#watch(nc);
      },
      warn: (e) => this.#warn(e),
    });
    this.dispatchEvent(new ConnectionEvent(true));
  }

  #watch(nc: NatsConnection): void {
    watchConnection(nc, {
      current: () => this.#conn?.nc === nc,
      disconnected: (server) => {
        this.#gapSince ??= Date.now();
        this.dispatchEvent(new TransportEvent(false, server));
      },
      reconnected: (server) => {
        this.dispatchEvent(new TransportEvent(true, server));
        this.#reconnected.resolveAll();
        void this.#presence.beat();
        this.#fillGap();
      },
      error: (err) => this.#error(err),
      closed: (err) => {
        if (this.#state === "running") this.#lost(err);
      },
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
    this.#reconnected.resolveAll();
  }

  /** The one serialized rebuild: retry with a widening backoff until bound or stopped. */
  #rebuild(cause: CotalError, immediate: boolean): Promise<void> {
    return rebuildUntilBound(
      {
        wanted: () => this.#state === "rebuilding",
        attempt: async () => {
          await this.#renewal.freshen();
          await this.#bringUp("rebuilding", false);
          this.#fillGap();
        },
        warn: (err, delay) => this.#warn(err, delay),
        sleeper: this.#sleeper,
        attempts: this.#attempts,
      },
      cause,
      immediate,
    );
  }

  /** Dial and bind; running once bound, unless stopped meanwhile. A failure undoes it all. */
  async #bringUp(from: "starting" | "rebuilding", boot: boolean): Promise<void> {
    let nc: NatsConnection | undefined;
    try {
      nc = await this.#dial();
      await this.#bind(nc, boot);
      // stop() meanwhile: it already ran, so this connection is ours to close.
      if (this.#state !== from) throw stoppedError();
      this.#state = "running";
      this.#renewal.schedule();
    } catch (err) {
      this.#teardown();
      await nc?.close().catch(() => {});
      throw err;
    }
  }

  /** Channel messages sent while the connection was down, fetched once it is back. */
  #fillGap(): void {
    const since = this.#gapSince;
    this.#gapSince = undefined;
    if (since !== undefined) void this.#channels.gapFill(since);
  }

  #record(status: PresenceStatus): Presence {
    return {
      card: this.#card!,
      status,
      ...(this.#activity !== undefined ? { activity: this.#activity } : {}),
      ...(this.#opts.lifecycleUid ? { lifecycleTag: lifecycleTag(this.#opts.lifecycleUid) } : {}),
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
