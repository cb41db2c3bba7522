/**
 * Proof of the caller on every control request (lib/trust/request_proof.ts, on the control
 * rail): the manager takes a request only when it carries a control-caller JWT of the space
 * naming the subject's caller and a fresh signature by that JWT's key, and a command with
 * effects once.
 *
 * @module
 */
import type { MsgHdrs } from "nats";
import {
  proveRequest,
  REQUEST_PROOF_WINDOW_MS,
  type RequestProver,
  requestProver,
  type RequestTrust,
  requestTrustOf,
  RequestVerifier,
} from "../trust/mod.ts";
import type { SpaceAuth } from "../trust/mod.ts";

/** How far a request's timestamp may be from the manager's clock (frozen: no request widens it). */
export const CONTROL_PROOF_WINDOW_MS = REQUEST_PROOF_WINDOW_MS;
/** The only credential profile whose holder may command a manager. */
export const CONTROL_CALLER_PROFILE = "control-caller";

const RAIL = Object.freeze({
  context: "cotal-control-request-v1",
  profiles: [CONTROL_CALLER_PROFILE],
  code: "unauthenticated_request",
  what: "control request",
  hint: "Send commands with ManagerClient and control-caller creds of this space (cotal ps, " +
    "cotal spawn do).",
});

/** What a caller signs with: its JWT and its key. */
export type ControlProver = RequestProver;
/** The keys a manager trusts to sign its callers' JWTs. */
export type ControlTrust = RequestTrust;

/** The prover of the holder of `creds` (a control-caller credential). */
export const controlProver: (creds: string) => Promise<ControlProver> = requestProver;

/** The keys of `auth`'s account: its own and its signing key. */
export const controlTrustOf: (auth: Pick<SpaceAuth, "account">) => Promise<ControlTrust> =
  requestTrustOf;

/** The headers proving that `prover` sends `body` on `subject` now. */
export function proveControlRequest(
  prover: ControlProver,
  subject: string,
  body: Uint8Array,
  now = Date.now(),
): Promise<MsgHdrs> {
  return proveRequest(prover, RAIL.context, subject, body, now);
}

/**
 * Checks control requests against a space's keys and remembers the nonces of commands: a
 * request verifier of the control rail (its context, the control-caller profile, its refusal).
 */
export class ControlVerifier extends RequestVerifier {
  constructor(trust: ControlTrust, opts: { now?: () => number } = {}) {
    super(trust, RAIL, opts);
  }
}
