/**
 * Keeps a space's streams and buckets in place across broker restarts. The presence bucket is
 * memory-backed (a file-backed one can latch a write error), so a broker that restarts comes
 * back without it; the manager, which holds the space's signer, re-runs the idempotent space
 * setup with a one-shot provisioner cred at its start and after every reconnect, retrying until
 * JetStream answers or the manager stops.
 *
 * @module
 */
import { abortableSleep } from "../abortable_sleep.ts";
import { errorText } from "../endpoint/mod.ts";
import { isCotalError } from "../errors.ts";
import { type CredentialSigner, mintWith, newIdentity } from "../trust/mod.ts";
import { setupSpaceStreams } from "../wire/mod.ts";

/** First retry delay after a failed setup (JetStream may still be recovering its store). */
export const HEAL_RETRY_BASE_MS = 100;
/** Longest delay between retries. */
export const HEAL_RETRY_CAP_MS = 5_000;

/** Options of {@linkcode healSpace}. */
export interface HealSpaceOptions {
  signer: CredentialSigner;
  servers: string[];
  space: string;
  log: (line: string) => void;
  /** Ends the retries (the manager stops). */
  signal: AbortSignal;
}

/** Setup failures no retry can mend: a conflicting stream, a credential the broker refuses. */
const PERMANENT = new Set(["stream_config_conflict", "permission_denied"]);

/**
 * Runs the space setup until it succeeds once, logging what it had to recreate. Resolves
 * `false` when `signal` ended it first; throws only what no retry can mend.
 */
export async function healSpace(opts: HealSpaceOptions): Promise<boolean> {
  for (let failures = 0; !opts.signal.aborted; failures++) {
    try {
      const creds = await mintWith(opts.signer, newIdentity(), "provisioner");
      const r = await setupSpaceStreams({ servers: opts.servers, space: opts.space, creds });
      if (r.created.length) opts.log(`manager: recreated ${r.created.join(", ")}`);
      return true;
    } catch (err) {
      if (isCotalError(err) && PERMANENT.has(err.code)) throw err;
      const delay = Math.min(HEAL_RETRY_BASE_MS * 2 ** failures, HEAL_RETRY_CAP_MS);
      if (failures === 0 || delay === HEAL_RETRY_CAP_MS) {
        opts.log(`manager: space setup failed (${errorText(err)}); retrying`);
      }
      await abortableSleep(delay, opts.signal);
    }
  }
  return false;
}
