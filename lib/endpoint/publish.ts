/**
 * Publishing an envelope through JetStream with `Nats-Msg-Id` = the message id, so the message
 * is captured (history, backstop) and still reaches live subscribers. A publish whose
 * acknowledgement is lost (a reconnect in flight) is retried with the same id: the stream's
 * duplicate window drops a copy that already landed.
 *
 * @module
 */

import type { JetStreamClient } from "nats";
import { CotalError } from "../errors.ts";
import { errorText } from "./credentials.ts";

/** How long one publish waits for its stream acknowledgement. */
export const PUBLISH_TIMEOUT_MS = 5_000;
/** Extra publish attempts after a timeout. */
export const PUBLISH_RETRIES = 2;

/** Publish `body` on `subject`; `js()` is asked again per attempt (the connection may change). */
export async function publishEnvelope(
  js: () => JetStreamClient,
  subject: string,
  body: Uint8Array,
  msgId: string,
  transportUp: (ms: number) => Promise<void>,
): Promise<void> {
  for (let attempt = 0;; attempt++) {
    try {
      await js().publish(subject, body, { msgID: msgId, timeout: PUBLISH_TIMEOUT_MS });
      return;
    } catch (err) {
      if (err instanceof CotalError) throw err;
      const code = (err as { code?: string }).code;
      if (code === "PERMISSIONS_VIOLATION") {
        throw new CotalError(
          "permission_denied",
          `The broker refused the publish to ${subject}: it is outside this credential's publish grant (allowPublish for channels).`,
          { cause: err },
        );
      }
      if (isPerSubjectFull(err)) {
        // Not transient: the stream keeps only so many unread per subject (a DM pair's or a
        // task queue's cap), and a retry in 5 s is refused again (fault pass 10 waited 10 s
        // per DM for "the stream may be missing").
        throw new CotalError(
          "recipient_backlog_full",
          `The broker refused the publish to ${subject}: its recipient has the most unread messages from this sender the space keeps (${
            errorText(err)
          }); wait until it reads some, then send again.`,
          { cause: err },
        );
      }
      if (attempt < PUBLISH_RETRIES && (code === "TIMEOUT" || code === "503")) {
        await transportUp(PUBLISH_TIMEOUT_MS);
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

/** The stream's per-subject cap refused the message (JetStream error 10077, discard new). */
function isPerSubjectFull(err: unknown): boolean {
  const e = err as { message?: string; api_error?: { err_code?: number } };
  return e?.api_error?.err_code === 10077 ||
    /maximum messages per subject exceeded/i.test(String(e?.message ?? ""));
}
