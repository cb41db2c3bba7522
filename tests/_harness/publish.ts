import type { JetStreamClient } from "nats";

/**
 * A JetStream publish that retries with the same msg-id until acknowledged, as Cotal's
 * endpoint does: nats-server 2.10 drops an in-flight publish while it reloads account config,
 * and the broker's duplicate window makes the retry safe (stored once).
 */
export async function publishWithRetry(
  js: JetStreamClient,
  subject: string,
  data: string,
  msgID: string,
  attempts = 5,
): Promise<void> {
  for (let i = 1;; i++) {
    try {
      await js.publish(subject, data, { msgID, timeout: 2_000 });
      return;
    } catch (err) {
      if (i >= attempts || !/TIMEOUT|503|no responders/i.test(String(err))) throw err;
    }
  }
}
