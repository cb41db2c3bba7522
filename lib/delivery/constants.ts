/**
 * The delivery daemon's fixed numbers and wire markers. Timing that bounds a safety property
 * (the lease, the redelivery ceiling) is policy, not configuration.
 *
 * @module
 */
import type { Rate } from "../rate.ts";
import { DELIVERY_LEASE_KEY } from "../wire/mod.ts";

/** Header every framed DLV copy carries; an agent terminates a DLV entry without it. */
export const DELIVERY_FRAME_HEADER = "Cotal-Delivery-Frame";
/** The only frame version this build writes and reads. */
export const DELIVERY_FRAME_VERSION = 1;

/** The fan-out durable on CHAT. */
export const FANOUT_DURABLE = "fanout";
/** The trusted reader durable on INBOX. */
export const READER_DURABLE = "reader";
/** Ack wait of the daemon's durables. */
export const DAEMON_ACK_WAIT_MS = 60_000;
/** In-flight cap of the reader, so one offline owner's backlog cannot pin unbounded entries. */
export const READER_MAX_ACK_PENDING = 1000;
/** In-flight cap of the fan-out. */
export const FANOUT_MAX_ACK_PENDING = 1000;
/** A reader entry for an unknown lifecycle is deferred this long, at most this many times. */
export const READER_NAK_DELAY_MS = 2000;
export const READER_MAX_DELIVERIES = 10;

/** The single-flight lease key (one shard per space). */
export const LEASE_KEY: string = DELIVERY_LEASE_KEY;
/** Renew period of the lease (the bucket TTL is 30 s). */
export const LEASE_RENEW_MS = 5_000;
/**
 * Without a successful renew for this long the daemon goes quiet: a successor can acquire only
 * once the row has aged out (30 s after the last write the broker stamped), so quiescing well
 * before that keeps two daemons from ever acting at once.
 */
export const LEASE_QUIESCE_AFTER_MS = 18_000;

/** `readHistory` default and maximum page size. */
export const READ_HISTORY_DEFAULT_LIMIT = 100;
export const READ_HISTORY_MAX_LIMIT = 200;

/**
 * Requests on a rail the daemon works on at once, per caller and in all: a request is a few
 * bytes, but a `readHistory` makes consumers on CHAT and holds up to a page of posts, so a
 * member flooding the rail would otherwise exhaust the daemon for the whole space. A request
 * past either is answered `delivery_busy` at once, never queued.
 */
export const RAIL_IN_FLIGHT: Readonly<{ perCaller: number; total: number }> = Object.freeze({
  perCaller: 4,
  total: 32,
});

/**
 * History reads (`readHistory`) at once, per caller and in all, within {@linkcode RAIL_IN_FLIGHT}.
 * Each pulls CHAT on the daemon's own connection, whose pending bytes the broker caps (64 MiB,
 * then it cuts the daemon off as a slow consumer): 8 reads of {@linkcode SCAN_BATCH} posts
 * each stay below it (red team 8: 134 cuts in 15 minutes).
 */
export const HISTORY_READS_IN_FLIGHT: Readonly<{ perCaller: number; total: number }> = Object
  .freeze({ perCaller: 1, total: 8 });

/**
 * History reads one member may ask for one after another: a burst of 32 (a harness paging back
 * through a few channels), then 2 a second. One read at a time per caller bounds the daemon's
 * memory, not its time: each read makes a consumer on CHAT and pulls a page, so 8 members
 * reading in a loop kept every other member's reads answered `delivery_busy` (red team 31).
 */
export const HISTORY_READ_RATE: Readonly<Rate> = Object.freeze({ perSecond: 2, burst: 32 });

/**
 * Durable joins and leaves one member may ask for: a burst of twice its share of channels (a
 * start that joins them all, then a reconnect that asks again), then 2 a second. Each change
 * writes a members row, recreates a consumer filter and wakes the membership feed: red team 29
 * held 30 % of a core across the daemon, the broker and the supervisor with 80 join-leave
 * cycles a second of one channel. Past it a request is answered `delivery_busy`, which an
 * endpoint asks again after a pause.
 */
export const MEMBERSHIP_CHANGE_RATE: Readonly<Rate> = Object.freeze({
  perSecond: 2,
  burst: 128,
});

/**
 * Durable channel rows one member lifecycle may hold (joined or left; a leave keeps its row).
 * Each is a row in the space's 64 MiB members bucket, up to ~8 KiB with a long channel name:
 * without a cap, one agent with a wildcard read grant filled the bucket in 30 s with joins of
 * channels nobody uses, and every member's join was refused for good (red team 9's S2).
 */
export const MAX_MEMBERSHIPS_PER_LIFECYCLE = 64;

/** Posts one pull of a CHAT scan (history read or catch-up) asks for: 4 MiB of 64 KiB posts. */
export const SCAN_BATCH = 64;
