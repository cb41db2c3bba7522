/**
 * Binding one broker connection to an endpoint's parts, in the order that keeps the roster
 * honest: the channel registry, then the consumers (a wrong lifecycle uid fails here, before
 * any presence row), then the channels (joined at boot, re-subscribed after a rebuild), then
 * presence.
 *
 * @module
 */

import type { JetStreamClient, JetStreamManager, NatsConnection } from "nats";
import type { CotalError } from "../errors.ts";
import type { Principal } from "../wire/mod.ts";
import { bucketNames } from "../wire/mod.ts";
import { watchBucket } from "./bucket_watch.ts";
import { openBucket } from "./buckets.ts";
import type { ChannelSet } from "./channels.ts";
import type { Consumers } from "./consumers.ts";
import type { PresenceTracker, WatchFactory } from "./presence.ts";
import type { EndpointOptions } from "./types.ts";

/** One live connection with its JetStream views. */
export interface Conn {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** What {@linkcode bindConnection} binds, and to whom it reports. */
export interface BindParts {
  readonly space: string;
  readonly opts: EndpointOptions;
  readonly principal: Principal;
  readonly role?: string;
  readonly channels: ChannelSet;
  readonly consumers: Consumers;
  readonly presence: PresenceTracker;
  /** Called with the connection before anything is bound (the endpoint starts using it). */
  readonly adopt: (conn: Conn) => void;
  readonly warn: (err: CotalError) => void;
}

/** Binds `nc`: at boot (`boot`) the boot channels are joined, after a rebuild re-subscribed. */
export async function bindConnection(
  nc: NatsConnection,
  boot: boolean,
  parts: BindParts,
): Promise<void> {
  const { opts, channels, presence, warn } = parts;
  const conn: Conn = {
    nc,
    js: nc.jetstream(),
    jsm: await nc.jetstreamManager({ checkAPI: false }),
  };
  parts.adopt(conn);
  const names = bucketNames(parts.space);
  // Buckets are watched without a consumer (bucket_watch.ts): no credential needs a
  // consumer-create grant on them.
  const watcher = (bucket: string): WatchFactory => (onEntry) => watchBucket(nc, bucket, onEntry);
  const registry = await openBucket(conn.js, conn.jsm, names.channels, warn);
  await channels.watchRegistry(registry ? watcher(names.channels) : undefined);
  // Consumers before presence: a wrong lifecycle uid fails here, with no roster ghost.
  if (opts.consume !== false) {
    await parts.consumers.bind(conn.js, {
      principal: parts.principal,
      lifecycleUid: opts.lifecycleUid!,
      role: parts.role,
    });
  }
  if (boot) { for (const ch of opts.channels ?? []) await channels.join(ch); }
  else await channels.resubscribe();
  const watch = opts.watchPresence !== false;
  const register = opts.registerPresence !== false;
  if (watch || register) {
    // Said once; tried again until the bucket is back (PresenceTracker.bindWhenThere).
    let told = false;
    const once = (err: CotalError) => {
      if (!told) warn(err);
      told = true;
    };
    await presence.bindWhenThere(
      () => openBucket(conn.js, conn.jsm, names.presence, once),
      { watch: watch && watcher(names.presence), register },
    );
  }
}
