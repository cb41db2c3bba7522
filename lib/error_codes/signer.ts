/**
 * The codes `lib/signer/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/signer/` throws. */
export type SignerErrorCode =
  | "audit_unwritable"
  | "broker_connect_failed"
  | "signer_bad_request"
  | "signer_busy"
  | "signer_failed"
  | "signer_not_self"
  | "signer_profile_refused"
  | "signer_rail_unknown"
  | "signer_rate_limited"
  | "signer_reserved_name"
  | "signer_ttl_refused"
  | "signer_unauthenticated"
  | "signer_unreachable";
