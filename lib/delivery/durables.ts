/**
 * The daemon's own two durables: `fanout` on CHAT and `reader` on INBOX. They are created on
 * first start and bound afterwards. A predecessor that died with deliveries in flight leaves
 * them parked until `ack_wait` (60 s) runs out; a new lease holder instead re-creates the
 * durable at its ack floor, so the gap is re-handled at once. Everything above the floor that
 * was already handled is written again under the same copy ids, which the 2 h duplicate
 * window of INBOX and DLV collapses.
 *
 * @module
 */

import { consumerInfo, wrapJs } from "../wire/mod.ts";
import { AckPolicy, type ConsumerConfig, DeliverPolicy, nanos } from "nats";
import {
  DAEMON_ACK_WAIT_MS,
  FANOUT_DURABLE,
  FANOUT_MAX_ACK_PENDING,
  READER_DURABLE,
  READER_MAX_ACK_PENDING,
} from "./constants.ts";
import type { DeliveryContext } from "./context.ts";

async function ensure(
  ctx: DeliveryContext,
  stream: string,
  name: string,
  filter: string,
  first: Partial<ConsumerConfig>,
  maxAckPending: number,
  resumeAt?: number,
): Promise<{ reset: boolean }> {
  const base: Partial<ConsumerConfig> = {
    durable_name: name,
    filter_subject: filter,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(DAEMON_ACK_WAIT_MS),
    max_ack_pending: maxAckPending,
  };
  const have = await consumerInfo(ctx.jsm, stream, name);
  if (!have) {
    // Re-created under a running loop (deleted by hand): from where that loop had got to.
    const start: Partial<ConsumerConfig> = resumeAt === undefined ? first : {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: resumeAt,
    };
    try {
      await ctx.jsm.consumers.add(stream, { ...base, ...start });
    } catch (err) {
      throw wrapJs(`create the durable ${name} on ${stream}`, err);
    }
    return { reset: false };
  }
  const floor = have.ack_floor.stream_seq;
  // Nothing parked, or no floor to restart from (a durable that never acked keeps its own
  // start; its in-flight messages redeliver after ack_wait).
  if (have.num_ack_pending === 0 || floor === 0) return { reset: false };
  try {
    await ctx.jsm.consumers.delete(stream, name);
    await ctx.jsm.consumers.add(stream, {
      ...base,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: floor + 1,
    });
  } catch (err) {
    throw wrapJs(`reset the durable ${name} on ${stream}`, err);
  }
  ctx.log.info(
    `reset ${name} on ${stream} to its ack floor ${floor} (${have.num_ack_pending} in flight ` +
      `from a previous holder are handled again now)`,
  );
  return { reset: true };
}

/**
 * Creates or resets the fan-out durable (`New` at creation: history is a join's catch-up);
 * one deleted under a running loop is created again at `resumeAt`.
 */
export function ensureFanoutDurable(
  ctx: DeliveryContext,
  resumeAt?: number,
): Promise<{ reset: boolean }> {
  return ensure(
    ctx,
    ctx.streams.chat,
    FANOUT_DURABLE,
    `${ctx.root}.chat.>`,
    { deliver_policy: DeliverPolicy.New },
    FANOUT_MAX_ACK_PENDING,
    resumeAt,
  );
}

/**
 * Creates or resets the trusted reader durable (`All`: every entry is judged); one deleted
 * under a running loop is created again at `resumeAt`.
 */
export function ensureReaderDurable(
  ctx: DeliveryContext,
  resumeAt?: number,
): Promise<{ reset: boolean }> {
  return ensure(
    ctx,
    ctx.streams.inbox,
    READER_DURABLE,
    `${ctx.root}.dinbox.>`,
    { deliver_policy: DeliverPolicy.All },
    READER_MAX_ACK_PENDING,
    resumeAt,
  );
}
