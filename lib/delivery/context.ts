/**
 * What every delivery loop and handler shares: the space's names, the connection, the
 * registry mirrors, the work fence and the log.
 *
 * @module
 */

import { limitLog } from "../log_limit.ts";
import type { JetStreamClient, JetStreamManager, KV, NatsConnection } from "nats";
import type { AclRecord, ChannelConfig, DeliveryClass } from "../wire/mod.ts";
import { CHANNEL_DEFAULTS_KEY, type SpaceBucketNames, type SpaceStreamNames } from "../wire/mod.ts";
import type { KvMirror } from "./kv_mirror.ts";
import type { PublishGate } from "./publish_gate.ts";
import type { MembershipRecord } from "./members.ts";
import type { SetAside } from "./setaside.ts";
import type { StorageWarden } from "./warden.ts";

/** Where the daemon's lines go; `warn` and `error` are the loud ones an operator must see. */
export interface DeliveryLogger {
  /** An informational line. */
  info(line: string): void;
  /** Something the daemon works around. */
  warn(line: string): void;
  /** Something that failed. */
  error(line: string): void;
}

/** A logger writing `<ISO time> cotal-delivery: <level>: <line>` to stderr. */
export function stderrLogger(prefix = "cotal-delivery"): DeliveryLogger {
  // Timestamped as the supervisor's and the signer's lines are: its log file is read after the fact.
  const out = (level: string) => (line: string) =>
    console.error(`${new Date().toISOString()} ${prefix}: ${level}: ${line}`);
  return { info: out("info"), warn: out("warning"), error: out("error") };
}

/**
 * The work fence. Every effect (publish, reply, ack) re-checks it with the token the work was
 * started under, so a handler descheduled across a lease loss or takeover never acts for a
 * shard it no longer holds.
 */
export class Fence {
  #epoch = 0;
  #active = false;

  /** Opens a new epoch of work and returns its token. */
  activate(): number {
    this.#active = true;
    return ++this.#epoch;
  }

  /** Closes the current epoch: every outstanding token stops being valid. */
  quiesce(): void {
    this.#active = false;
    this.#epoch++;
  }

  /** The token new work starts under. */
  get token(): number {
    return this.#epoch;
  }

  get active(): boolean {
    return this.#active;
  }

  /** True while `token`'s epoch is the current, active one. */
  mayAct(token: number): boolean {
    return this.#active && token === this.#epoch;
  }
}

/** Counters for status and the bench. */
export interface DeliveryCounters {
  /** Posts fanned out to members. */
  fannedOut: number;
  /** INBOX entries written. */
  entriesWritten: number;
  /** Copies written to members' DLV. */
  delivered: number;
  /** Copies dropped: the member may not read the channel. */
  droppedAcl: number;
  /** Copies dropped: posted after the member left the channel. */
  droppedWindow: number;
  /** Entries dropped: not a readable message. */
  droppedMalformed: number;
  /** Entries deferred: the member's rows were not known yet. */
  deferred: number;
  /** Entries given up on after their tries (a retired lifecycle's). */
  terminated: number;
  /** Errors met. */
  errors: number;
  /**
   * Since when a loop has only failed (every message it handled since was redelivered): what
   * `cotal status` shows as a stall. Cleared by the next success.
   */
  stalledSince?: number;
  /** The last failure of a loop (`<loop>: <why>`), kept beside `stalledSince`. */
  lastError?: string;
}

/** Members of one channel, keyed by their member-registry key. */
export type ChannelMembers = Map<string, MembershipRecord>;

/** Everything a loop or handler needs. */
export interface DeliveryContext {
  space: string;
  /** `cotal.<token>`. */
  root: string;
  streams: SpaceStreamNames;
  buckets: SpaceBucketNames;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Every copy-path publish goes through it (bounded in flight). */
  gate: PublishGate;
  /** The daemon's own principal dot form. */
  self: string;
  fence: Fence;
  log: DeliveryLogger;
  channels: KvMirror<ChannelConfig>;
  members: KvMirror<MembershipRecord>;
  acl: KvMirror<AclRecord>;
  /** The members bucket, for the daemon's own row writes. */
  membersKv: KV;
  /** Rows of the members mirror, indexed by channel. */
  byChannel: Map<string, ChannelMembers>;
  counters: DeliveryCounters;
  /** Dead letters and members' gaps (bound once the daemon holds the lease). */
  setaside?: SetAside;
  /** Keeps DM, TASK and DLV open to everyone (runs while the daemon holds the lease). */
  warden?: StorageWarden;
}

/** A fresh set of zeroed counters. */
export function newCounters(): DeliveryCounters {
  return {
    fannedOut: 0,
    entriesWritten: 0,
    delivered: 0,
    droppedAcl: 0,
    droppedWindow: 0,
    droppedMalformed: 0,
    deferred: 0,
    terminated: 0,
    errors: 0,
  };
}

/** The delivery class of `channel` from the mirrored registry: its own, the default, `durable`. */
export function deliveryClassOf(ctx: DeliveryContext, channel: string): DeliveryClass {
  return ctx.channels.get(channel)?.value.deliveryClass ??
    ctx.channels.get(CHANNEL_DEFAULTS_KEY)?.value.deliveryClass ?? "durable";
}

/** The live ACL rows of a principal alias (`<owner>.<actor>`), as `[uid, record]` pairs. */
export function aliasAclRows(ctx: DeliveryContext, member: string): [string, AclRecord][] {
  const prefix = `${member}.`;
  const rows: [string, AclRecord][] = [];
  for (const [key, e] of ctx.acl.entries()) {
    if (key.startsWith(prefix) && !key.slice(prefix.length).includes(".")) {
      rows.push([key.slice(prefix.length), e.value]);
    }
  }
  return rows;
}

/**
 * `log` with its warnings rate-limited per kind (the text before the first `:` or `(`): many
 * of them are caused by what members send, and must not grow the daemon's log without bound.
 */
export function floodSafeLogger(log: DeliveryLogger): DeliveryLogger & { flush(): void } {
  const limited = limitLog((line) => log.warn(line));
  return {
    info: (line) => log.info(line),
    warn: (line) => limited(line.split(/[:(]/, 1)[0].slice(0, 64), line),
    error: (line) => log.error(line),
    flush: () => limited.flush(),
  };
}
