/**
 * Binding (never creating) a space's KV buckets: an agent credential can read a bucket's
 * stream info but not create it, and `setupSpaceStreams` owns their configs.
 *
 * @module
 */

import type { JetStreamClient, JetStreamManager, KV } from "nats";
import { CotalError } from "../errors.ts";
import { isNotFound, kvStreamName, wrapJs } from "../wire/mod.ts";

/**
 * Bind `bucket`; a missing bucket is a warning (the space was not set up) and yields
 * undefined, any other failure (a permission refusal) throws. npm:nats's `bindOnly` does not
 * look at the stream, so its existence is checked first.
 */
export async function openBucket(
  js: JetStreamClient,
  jsm: JetStreamManager,
  bucket: string,
  warn: (err: CotalError) => void,
): Promise<KV | undefined> {
  try {
    await jsm.streams.info(kvStreamName(bucket));
  } catch (err) {
    if (!isNotFound(err) && !/stream not found/i.test(String(err))) {
      throw wrapJs(`bind the KV bucket ${bucket}`, err);
    }
    warn(
      new CotalError(
        "bucket_missing",
        `The KV bucket ${bucket} does not exist; run setupSpaceStreams for this space.`,
      ),
    );
    return undefined;
  }
  // Never Direct Get (see js.msgGet in lib/trust/grant_names.ts): gets go through the API.
  return await js.views.kv(bucket, { bindOnly: true, allow_direct: false });
}
