/**
 * lib/delivery: the durable backstop of one space (fan-out writer, trusted reader, the
 * single-flight lease, the `ctl.delivery` service), the membership feed and live eviction, and
 * the caller side of the daemon's rails.
 *
 * @module
 */

export { type DeliveryDaemon, type DeliveryExit, type DeliveryStatus, runDelivery } from "./run.ts";
export { type DeliveryLogger } from "./context.ts";
export { decodeFrame } from "./frames.ts";
export { deliveryRequest } from "./client.ts";
export { type FeedStatus } from "./membership_feed.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export type { DeliveryCounters } from "./context.ts";
export type { DeadLetter, Gap, ToldGap, TrimRecord } from "./setaside.ts";
