/**
 * What the signer signs, for whom: frozen server-side constants. A request names a profile, a
 * public key and mint options; nothing in it widens a cap here.
 *
 * @module
 */
import { TokenBuckets } from "../rate.ts";
import { type Profile, REQUEST_PROOF_WINDOW_MS } from "../trust/mod.ts";

/** How one requested profile is bounded. */
export interface ProfileRule {
  /** The longest TTL signed, in seconds (also within the profile's own maximum). */
  readonly maxTtlSeconds: number;
  /** Only for the caller's own public key (a renewal of itself). */
  readonly selfOnly?: boolean;
}

const MINUTE = 60;
const DAY = 86_400;

/**
 * Caller profile → the profiles it may ask for. The supervisor: its agents' creds (a day, as
 * it renews them at 75 %), the one-shot provisioner and deprovisioner it provisions and tears
 * an agent down with, control-caller creds for agents it lets command it, and its own renewal.
 * Nothing else may call; no caller gets admin, observer, delivery, teardown or backup.
 */
export const SIGNER_POLICY: Readonly<
  Record<string, Readonly<Partial<Record<Profile, ProfileRule>>>>
> = Object.freeze({
  supervisor: Object.freeze({
    agent: Object.freeze({ maxTtlSeconds: DAY }),
    provisioner: Object.freeze({ maxTtlSeconds: 5 * MINUTE }),
    deprovisioner: Object.freeze({ maxTtlSeconds: 5 * MINUTE }),
    "control-caller": Object.freeze({ maxTtlSeconds: 5 * MINUTE }),
    supervisor: Object.freeze({ maxTtlSeconds: DAY, selfOnly: true }),
  }),
});

/** The caller profiles the signer rail admits. */
export const SIGNER_CALLERS: readonly string[] = Object.freeze(Object.keys(SIGNER_POLICY));

/** Requests one caller may make: a steady rate and a burst (a token bucket). */
export const SIGNER_RATE = Object.freeze({ perSecond: 1_000, burst: 2_000 });

/**
 * The nonces remembered per caller: all that {@linkcode SIGNER_RATE} lets a caller send while a
 * nonce is kept (twice the proof window), so the rate, not the memory, is what refuses a flood.
 * At the shared default (100,000) a caller at its full rate filled it, and every request under
 * its name, an honest supervisor's too, was refused for 20 s after the flood stopped (red team 45).
 */
export const SIGNER_REPLAY_CAP = SIGNER_RATE.burst +
  SIGNER_RATE.perSecond * Math.ceil((2 * REQUEST_PROOF_WINDOW_MS) / 1000);

/** Principal names no signed credential may speak as (the mesh's own roles). */
export const SIGNER_RESERVED_ACTORS: readonly string[] = Object.freeze([
  "operator",
  "manager",
  "delivery",
  "auth",
  "system",
  "signer",
  // The control caller `cotal up` and `cotal status` mint to ask the supervisor its status: an
  // agent under this name could read those answers.
  "status",
]);

/** A name that is, or reads as, one of the mesh's own (any case: `Manager` looks the same). */
export function isReservedActor(actor: unknown): boolean {
  if (typeof actor !== "string") return false;
  const a = actor.toLowerCase();
  return SIGNER_RESERVED_ACTORS.some((r) => a === r || a.startsWith(`${r}_`));
}

/** A token bucket per caller key, at {@linkcode SIGNER_RATE}. */
export class CallerRate extends TokenBuckets {
  constructor(now: () => number = Date.now) {
    super(SIGNER_RATE, { now });
  }
}
