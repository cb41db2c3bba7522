/**
 * The canonical JetStream configs of a space (the five message streams and the KV buckets)
 * and `setupSpaceStreams`, which creates what is missing, checks what exists, and reconciles
 * the TTL of the TTL'd buckets (a KV create never updates an existing bucket).
 *
 * @module
 */

import {
  DiscardPolicy,
  type JetStreamManager,
  nanos,
  type NatsConnection,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
  type StreamInfo,
} from "nats";
import { CotalError } from "../errors.ts";
import { type BrokerTarget, withBroker } from "./connect.ts";
import { isNotFound, jsmCall, wrapJs } from "./js_errors.ts";
import { bucketNames, kvStreamName, streamNames } from "./resources.ts";
import { subjectRoot } from "./subjects.ts";

/** Presence bucket TTL: a crashed agent's row ages out after this. */
export const PRESENCE_TTL_MS = 6_000;
/** Delivery-daemon lease bucket TTL (the crash-safe release of `lease.0`). */
export const DELIVERY_LEASE_TTL_MS = 30_000;
/** The delivery lease's one key (one shard per space), and the only key its bucket stores. */
export const DELIVERY_LEASE_KEY = "lease.0";
/** Manager lease bucket TTL. */
export const MANAGER_LEASE_TTL_MS = 10_000;
/** Default duplicate window of the message streams. */
export const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60_000;
/** Plane-3 duplicate window: the cross-path exactly-once horizon of the backstop. */
export const PLANE3_DUPLICATE_WINDOW_MS = 2 * 60 * 60_000;
/** Size cap of the display-only membership feed bucket. */
export const MEMBERSHIP_FEED_MAX_BYTES = 64 * 1024 * 1024;

const MIB = 1024 * 1024;
const DAY_MS = 24 * 60 * 60_000;

/**
 * The largest channel post CHAT stores. CHAT is a history window that drops its oldest posts,
 * so a sender's share of it is its per-channel cap times this: 1000 × 64 KiB = 64 MiB for each
 * channel it may post to, a sixteenth of the stream, where a 1 MiB post let two publish grants
 * evict every other sender's history. It also leaves the broker's 1 MiB `max_payload` ample room
 * for the delivery frame around a copy. Larger content goes to the Object Store, referenced by
 * an artifact part.
 */
export const CHAT_MAX_MESSAGE_BYTES = 64 * 1024;

/**
 * The largest DM or task DM and TASK store. Both hold what waits for someone offline, so a
 * sender's share is its per-pair cap times this: 256 × 64 KiB = 16 MiB for each recipient or
 * role, a small part of either stream. Larger content goes to the Object Store, referenced by
 * an artifact part.
 */
export const DIRECT_MAX_MESSAGE_BYTES = 64 * 1024;

/**
 * A member's backlog of unread durable copies (DLV, per member lifecycle). Read copies leave
 * the stream (interest retention); a copy beyond the backlog is refused at publish, and the
 * delivery daemon records the gap and hands the member a marker with its count and range (the
 * member reads what it missed from channel history). Every member of a durable channel holds
 * one copy of each post until it reads it, and a member that never reads (a hostile one
 * included) keeps its whole backlog for 30 days: 512 copies of at most 64 KiB, 32 MiB, where
 * 1000 copies of 1 MiB posts let one fill DLV (many such members together are the delivery
 * daemon's storage warden's to hold back, `lib/delivery/warden.ts`). A
 * reading member falls 512 copies behind only in a burst (256 made a member reading as fast as
 * it could miss copies in a burst of 1,000 posts).
 */
export const MEMBER_BACKLOG_CAP = 512;

/** How long the set-aside records (dead letters, pending gap markers) are kept. */
export const SETASIDE_TTL_MS = 30 * DAY_MS;

/**
 * What each stream may hold, by its purpose (frozen: an agent cannot change them, and a space's
 * account JWT caps their sum, `SPACE_JETSTREAM_LIMITS`). Per-subject caps keep one sender (CHAT,
 * DM, TASK) or one member (INBOX, DLV) from holding more than its share. DM and TASK keep a
 * message only while a durable waits for it (interest retention): a DM to a principal with no
 * live lifecycle, or a task to a role no agent was ever given, is not stored at all, so no
 * sender can fill them by writing to names nobody reads. At a byte cap, CHAT (a history window)
 * drops its oldest posts; DM and TASK refuse the new message instead, so a flood is told "no"
 * at publish and no acknowledged DM or task is ever dropped to make room for it. Shares add up
 * when many recipients never read; the delivery daemon's storage warden keeps DM, TASK and DLV
 * under half full by making the largest unread backlogs yield (`lib/delivery/warden.ts`).
 */
export const STREAM_LIMITS: Readonly<
  Record<
    "chat" | "dm" | "task" | "inbox" | "dlv",
    Readonly<{ maxBytes: number; maxAgeMs: number; maxMsgsPerSubject: number }>
  >
> = Object.freeze({
  // Channel history: the newest 1000 posts per sender and channel, for 30 days.
  chat: Object.freeze({ maxBytes: 1024 * MIB, maxAgeMs: 30 * DAY_MS, maxMsgsPerSubject: 1000 }),
  // DMs wait for their recipient two weeks, 256 per sender-recipient pair (16 MiB at most:
  // 32 offline recipients before one sender could fill the stream).
  dm: Object.freeze({ maxBytes: 512 * MIB, maxAgeMs: 14 * DAY_MS, maxMsgsPerSubject: 256 }),
  // Tasks wait a week for a worker of their role, 256 per sender and role.
  task: Object.freeze({ maxBytes: 256 * MIB, maxAgeMs: 7 * DAY_MS, maxMsgsPerSubject: 256 }),
  // The durable backstop: INBOX, the daemon's own queue (a member's newest 1000 entries), and
  // DLV, a member's unread copies (1000 at most), both for 30 days.
  inbox: Object.freeze({ maxBytes: 1024 * MIB, maxAgeMs: 30 * DAY_MS, maxMsgsPerSubject: 1000 }),
  dlv: Object.freeze({
    maxBytes: 1024 * MIB,
    maxAgeMs: 30 * DAY_MS,
    maxMsgsPerSubject: MEMBER_BACKLOG_CAP,
  }),
});

/** The largest row an agent can write to the presence bucket (its whole card fits in 4 KiB). */
export const PRESENCE_MAX_ROW_BYTES = 64 * 1024;
/** The largest row of the coordination buckets (channels, members, ACL, leases, set-aside). */
export const COORDINATION_MAX_ROW_BYTES = 64 * 1024;

/** Options shared by the space-setup calls. */
export interface SpaceSetupOptions {
  /** 1 (default) or 3 for a clustered broker. CAS publishes need R1 on CHAT. */
  replicas?: 1 | 3;
}

/** One stream Cotal owns, with the fields a conflicting pre-existing copy must match. */
export interface CanonicalStream {
  config: Partial<StreamConfig> & { name: string; subjects: string[] };
  /** Bucket TTL in ms when this is a TTL'd KV bucket (reconciled in place). */
  ttlMs?: number;
}

function messageStream(
  name: string,
  subjects: string[],
  replicas: number,
  extra: Partial<StreamConfig> = {},
): CanonicalStream {
  return {
    config: {
      name,
      subjects,
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: replicas,
      max_age: 0,
      max_msgs: -1,
      max_bytes: -1,
      max_msg_size: -1,
      discard: DiscardPolicy.Old,
      duplicate_window: nanos(DEFAULT_DUPLICATE_WINDOW_MS),
      allow_direct: false,
      allow_rollup_hdrs: false,
      ...extra,
    },
  };
}

/** The five message streams of a space, exactly as the reference configures them. */
export function spaceStreamConfigs(space: string, opts: SpaceSetupOptions = {}): CanonicalStream[] {
  const r = opts.replicas ?? 1;
  const n = streamNames(space);
  const P = subjectRoot(space);
  const limits = (l: (typeof STREAM_LIMITS)["chat"]) => ({
    max_bytes: l.maxBytes,
    max_age: nanos(l.maxAgeMs),
    max_msgs_per_subject: l.maxMsgsPerSubject,
  });
  const plane3 = { duplicate_window: nanos(PLANE3_DUPLICATE_WINDOW_MS) };
  return [
    // Direct Get is off on every stream and bucket: on DM and TASK it would read past the
    // per-agent consumer filters, and anywhere it answers to a reply subject the requester
    // picks, so it would replay stored bytes and headers onto any subject of the space.
    messageStream(n.chat, [`${P}.chat.>`], r, {
      ...limits(STREAM_LIMITS.chat),
      max_msg_size: CHAT_MAX_MESSAGE_BYTES,
    }),
    // DM and TASK refuse a pair's message past its cap (discard new per subject) rather than
    // drop its oldest: a member can aim broker answers at another pair's subject (the broker
    // checks no reply subject), and must not evict what was acknowledged to others. Interest
    // retention: a message no durable filters for (no such recipient, no such role) is
    // acknowledged by the broker and never stored; what the recipient's durable acked leaves.
    messageStream(n.dm, [`${P}.inst.>`], r, {
      ...limits(STREAM_LIMITS.dm),
      retention: RetentionPolicy.Interest,
      max_msg_size: DIRECT_MAX_MESSAGE_BYTES,
      discard: DiscardPolicy.New,
      discard_new_per_subject: true,
    }),
    messageStream(n.task, [`${P}.svc.>`], r, {
      ...limits(STREAM_LIMITS.task),
      retention: RetentionPolicy.Interest,
      max_msg_size: DIRECT_MAX_MESSAGE_BYTES,
      discard: DiscardPolicy.New,
      discard_new_per_subject: true,
    }),
    messageStream(n.inbox, [`${P}.dinbox.>`], r, { ...limits(STREAM_LIMITS.inbox), ...plane3 }),
    // A member's durable copies: each lifecycle's one consumer reads its own subject, and what
    // it acked leaves (interest); a full backlog refuses the copy (the daemon records a gap).
    messageStream(n.dlv, [`${P}.dlv.>`], r, {
      ...limits(STREAM_LIMITS.dlv),
      ...plane3,
      retention: RetentionPolicy.Interest,
      discard: DiscardPolicy.New,
      discard_new_per_subject: true,
    }),
  ];
}

function kvBucket(
  bucket: string,
  replicas: number,
  opts: {
    ttlMs?: number;
    storage?: StorageType;
    maxBytes?: number;
    maxRowBytes?: number;
    rollups?: boolean;
    /** The only keys the bucket stores (default: any). */
    keys?: string[];
  } = {},
): CanonicalStream {
  const ttl = opts.ttlMs ?? 0;
  return {
    ttlMs: opts.ttlMs,
    config: {
      name: kvStreamName(bucket),
      subjects: (opts.keys ?? [">"]).map((k) => `$KV.${bucket}.${k}`),
      retention: RetentionPolicy.Limits,
      storage: opts.storage ?? StorageType.File,
      num_replicas: replicas,
      max_msgs_per_subject: 1,
      max_msgs: -1,
      max_bytes: opts.maxBytes ?? 64 * MIB,
      max_msg_size: opts.maxRowBytes ?? -1,
      max_age: nanos(ttl),
      // The broker refuses a duplicate window longer than max_age.
      duplicate_window: nanos(
        ttl > 0 ? Math.min(ttl, DEFAULT_DUPLICATE_WINDOW_MS) : DEFAULT_DUPLICATE_WINDOW_MS,
      ),
      discard: DiscardPolicy.New,
      allow_rollup_hdrs: opts.rollups ?? true,
      deny_delete: true,
      deny_purge: false,
      allow_direct: false,
      mirror_direct: false,
    },
  };
}

/** The KV buckets of a space (presence, registries, leases, membership feed). */
export function spaceBucketConfigs(space: string, opts: SpaceSetupOptions = {}): CanonicalStream[] {
  const r = opts.replicas ?? 1;
  const b = bucketNames(space);
  return [
    // Memory storage: a file-backed presence store can latch a permanent write error, and
    // every live agent republishes its row within a heartbeat after a broker restart.
    // Agents write their own presence key: a rollup header on it would erase every row, and
    // the broker cannot tell a key's rollup from the bucket's, so none is accepted.
    kvBucket(b.presence, r, {
      ttlMs: PRESENCE_TTL_MS,
      storage: StorageType.Memory,
      maxBytes: 16 * MIB,
      maxRowBytes: PRESENCE_MAX_ROW_BYTES,
      rollups: false,
    }),
    // Coordination rows are small: a row cap refuses the large broker answers (a stream info
    // of up to a MiB) a member can aim at a key, so a few requests cannot fill a bucket.
    kvBucket(b.channels, r, { maxBytes: 16 * MIB, maxRowBytes: COORDINATION_MAX_ROW_BYTES }),
    kvBucket(b.members, r, { maxRowBytes: COORDINATION_MAX_ROW_BYTES }),
    kvBucket(b.acl, r, { maxRowBytes: COORDINATION_MAX_ROW_BYTES }),
    // One row per principal (`owner.actor`) and the feed's heartbeat (`=feed`).
    kvBucket(b.membership, r, { maxBytes: MEMBERSHIP_FEED_MAX_BYTES, keys: ["*.*", "=feed"] }),
    // The delivery lease has one key: the bucket stores nothing else, so answers a member aims
    // at other keys are not stored at all and cannot fill it (red team 20b filled 1 MiB with
    // 4,000 of them, and the next start could not create the row).
    kvBucket(b.delivery, r, {
      ttlMs: DELIVERY_LEASE_TTL_MS,
      maxBytes: MIB,
      maxRowBytes: COORDINATION_MAX_ROW_BYTES,
      keys: [DELIVERY_LEASE_KEY],
    }),
    // The supervisors' leases (one per instance) and the renewal row: nothing else is stored.
    kvBucket(b.manager, r, {
      ttlMs: MANAGER_LEASE_TTL_MS,
      maxBytes: MIB,
      maxRowBytes: COORDINATION_MAX_ROW_BYTES,
      keys: ["lease.*", "renewal"],
    }),
    // The delivery daemon's records by kind: dead letters, gaps owed, gaps told, trims.
    kvBucket(b.setaside, r, {
      ttlMs: SETASIDE_TTL_MS,
      maxBytes: 16 * MIB,
      maxRowBytes: COORDINATION_MAX_ROW_BYTES,
      keys: ["dead.>", "gap.>", "told.>", "trim.>"],
    }),
  ];
}

/** What {@linkcode setupSpaceStreams} did. */
export interface SpaceSetupResult {
  /** Streams (including `KV_` bucket streams) this call created. */
  created: string[];
  /** Streams that already existed with a compatible config. */
  existing: string[];
  /** TTL'd buckets whose `max_age` was corrected. */
  reconciled: { stream: string; fromMs: number; toMs: number }[];
  /** Existing streams whose caps or rollup refusal were brought in line. */
  limited: string[];
  /**
   * Existing streams kept in a shape the broker cannot move in place: a TASK work queue from
   * before tasks were kept only for roles that have a queue (the broker refuses to change a
   * work queue's retention). It still works; tasks to a role no agent has are stored there.
   */
  outdated: string[];
}

/** Options of {@linkcode setupSpaceStreams}. */
export interface SetupSpaceStreamsOptions extends BrokerTarget, SpaceSetupOptions {
  /** The space's display name (mapped through `token()` for every wire name). */
  space: string;
}

/**
 * Create a space's streams and buckets (CHAT, DM, TASK, INBOX, DLV; presence,
 * channels, members, acl, membership feed, delivery and manager leases). Idempotent: existing
 * streams are checked (subjects, retention), their caps and flags (Direct Get off) applied, and the
 * TTL of the presence and lease buckets is reconciled. Needs a `provisioner` credential.
 */
export async function setupSpaceStreams(opts: SetupSpaceStreamsOptions): Promise<SpaceSetupResult> {
  return await withBroker(opts, (nc) => setupSpaceStreamsOn(nc, opts.space, opts), {
    name: "cotal-setup",
  });
}

/** {@linkcode setupSpaceStreams} on an existing connection. */
export async function setupSpaceStreamsOn(
  nc: NatsConnection,
  space: string,
  opts: SpaceSetupOptions = {},
): Promise<SpaceSetupResult> {
  const jsm = await nc.jetstreamManager();
  const result: SpaceSetupResult = {
    created: [],
    existing: [],
    reconciled: [],
    limited: [],
    outdated: [],
  };
  for (const c of [...spaceStreamConfigs(space, opts), ...spaceBucketConfigs(space, opts)]) {
    const info = await streamInfo(jsm, c.config.name);
    if (!info) {
      await jsmCall(`create stream ${c.config.name}`, () => jsm.streams.add(c.config));
      result.created.push(c.config.name);
      continue;
    }
    checkCompatible(c, info);
    result.existing.push(c.config.name);
    if (outdatedTask(info.config, c.config)) result.outdated.push(c.config.name);
    // A space set up before these limits (or before rollups were refused on its agent-written
    // bucket) is brought in line: the caps and the rollup refusal are applied in place.
    const drift = limitDrift(c, info);
    if (Object.keys(drift).length) {
      await jsmCall(
        `apply the limits of ${c.config.name}`,
        () => jsm.streams.update(c.config.name, drift),
      );
      result.limited.push(c.config.name);
    }
    if (c.ttlMs !== undefined && info.config.max_age !== nanos(c.ttlMs)) {
      const dup = Math.min(info.config.duplicate_window, nanos(c.ttlMs));
      await jsmCall(
        `reconcile the TTL of ${c.config.name}`,
        () =>
          jsm.streams.update(c.config.name, { max_age: nanos(c.ttlMs!), duplicate_window: dup }),
      );
      result.reconciled.push({
        stream: c.config.name,
        fromMs: Math.round(info.config.max_age / 1e6),
        toMs: c.ttlMs,
      });
    }
  }
  return result;
}

/** A stream's info, or undefined when it does not exist (any other failure throws). */
export async function streamInfo(
  jsm: JetStreamManager,
  name: string,
): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapJs(`read stream ${name}`, err);
  }
}

/** The caps and flags of `c` an existing stream lacks (never a TTL: that is reconciled apart). */
function limitDrift(c: CanonicalStream, info: StreamInfo): Partial<StreamConfig> {
  const want = c.config;
  const have = info.config;
  const drift: Partial<StreamConfig> = {};
  for (const k of ["max_bytes", "max_msg_size", "max_msgs_per_subject"] as const) {
    if (want[k] !== undefined && want[k] !== -1 && have[k] !== want[k]) drift[k] = want[k];
  }
  if (c.ttlMs === undefined && want.max_age && have.max_age !== want.max_age) {
    drift.max_age = want.max_age;
  }
  if (want.allow_rollup_hdrs === false && have.allow_rollup_hdrs) drift.allow_rollup_hdrs = false;
  if (narrows(have, want)) drift.subjects = want.subjects;
  // A space set up when Direct Get was on (CHAT and the buckets) has it turned off in place.
  if (want.allow_direct === false && have.allow_direct) drift.allow_direct = false;
  if (want.discard !== undefined && have.discard !== want.discard) drift.discard = want.discard;
  if (want.discard_new_per_subject && !have.discard_new_per_subject) {
    drift.discard_new_per_subject = true;
  }
  // A space set up when DLV kept read copies (limits) moves to interest: the broker allows
  // that one change, and what members had read is dropped with it.
  if (want.retention === RetentionPolicy.Interest && have.retention === RetentionPolicy.Limits) {
    drift.retention = RetentionPolicy.Interest;
  }
  return drift;
}

/** A bucket that stored any key, set up before it was narrowed to the keys it uses. */
function narrows(have: StreamConfig, want: { name: string; subjects: string[] }): boolean {
  const any = `$KV.${want.name.slice("KV_".length)}.>`;
  return have.subjects?.length === 1 && have.subjects[0] === any &&
    JSON.stringify(want.subjects) !== JSON.stringify([any]) &&
    want.subjects.every((s) => s.startsWith(any.slice(0, -1)));
}

/** Limits → interest is the one retention change the broker makes in place (DLV, DM). */
function migrates(have: StreamConfig, want: Partial<StreamConfig>): boolean {
  return have.retention === RetentionPolicy.Limits && want.retention === RetentionPolicy.Interest;
}

/** A work-queue TASK stream of an older setup: compatible, but never moved (see `outdated`). */
function outdatedTask(have: StreamConfig, want: Partial<StreamConfig>): boolean {
  return have.retention === RetentionPolicy.Workqueue &&
    want.retention === RetentionPolicy.Interest && want.name?.startsWith("TASK_") === true;
}

function checkCompatible(c: CanonicalStream, info: StreamInfo): void {
  const want = c.config;
  const have = info.config;
  const problems: string[] = [];
  if (
    JSON.stringify([...have.subjects ?? []].sort()) !== JSON.stringify([...want.subjects].sort()) &&
    !narrows(have, want)
  ) {
    problems.push(
      `subjects ${JSON.stringify(have.subjects)} instead of ${JSON.stringify(want.subjects)}`,
    );
  }
  if (have.retention !== want.retention && !migrates(have, want) && !outdatedTask(have, want)) {
    problems.push(`retention ${have.retention} instead of ${want.retention}`);
  }
  if (problems.length > 0) {
    throw new CotalError(
      "stream_config_conflict",
      `Stream ${want.name} already exists with ${problems.join(" and ")}; remove it with a ` +
        `teardown credential (or restore the canonical config) and run setup again.`,
    );
  }
}
