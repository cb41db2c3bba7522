/**
 * lib/delivery: the durable backstop of one space (fan-out writer, trusted reader, the
 * single-flight lease, the `ctl.delivery` service), the membership feed and live eviction, and
 * the caller side of the daemon's rails.
 *
 * @module
 */

export { type DeliveryDaemon, type DeliveryExit, type DeliveryStatus, runDelivery } from "./run.ts";
export { type DeliveryLogger, stderrLogger } from "./context.ts";
export {
  DELIVERY_FRAME_HEADER,
  DELIVERY_FRAME_VERSION,
  FANOUT_DURABLE,
  LEASE_KEY,
  READER_DURABLE,
} from "./constants.ts";
export {
  copyId,
  decodeFrame,
  type DeliveryFrame,
  encodeFrame,
  type EntryReason,
  type FrameRefusal,
  type InboxEntry,
  renderFrame,
} from "./frames.ts";
export { durableEligible, type MembershipRecord, type MembershipState } from "./members.ts";
export { type LeaseInfo } from "./lease.ts";
export { deliveryRequest, type DeliveryRequestOptions, probeDeliveryLiveness } from "./client.ts";
export {
  assertEvictablePrincipal,
  type EvictOptions,
  evictPrincipal,
  type EvictResult,
} from "./evict.ts";
export { type SysSource } from "./sys_creds.ts";
export { FEED_HEARTBEAT_KEY, type FeedStatus } from "./membership_feed.ts";
export { type FeedRow } from "./feed_rows.ts";
export { type HistoryPage } from "./history.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export type { DeliveryCounters } from "./context.ts";
export type { DeadLetter, Gap, ToldGap, TrimRecord } from "./setaside.ts";
