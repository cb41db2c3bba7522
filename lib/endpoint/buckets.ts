/**
 * Binding (never creating) a space's KV buckets: an agent credential can read a bucket's
 * stream info but not create it, and `setupSpaceStreams` owns their configs.
 *
 * @module
 */

import type { JetStreamClient, KV } from "nats";
import { CotalError } from "../errors.ts";
import { isNotFound, wrapJs } from "../wire/streams.ts";

/**
 * Bind `bucket`; a missing bucket is a warning (the space was not set up) and yields
 * undefined, any other failure (a permission refusal) throws.
 */
export async function openBucket(
  js: JetStreamClient,
  bucket: string,
  warn: (err: CotalError) => void,
): Promise<KV | undefined> {
  try {
    return await js.views.kv(bucket, { bindOnly: true });
  } catch (err) {
    if (isNotFound(err) || /stream not found|bucket not found/i.test(String(err))) {
      warn(
        new CotalError(
          "bucket_missing",
          `The KV bucket ${bucket} does not exist; run setupSpaceStreams for this space.`,
        ),
      );
      return undefined;
    }
    throw wrapJs(`bind the KV bucket ${bucket}`, err);
  }
}
