/**
 * The codes `lib/nats/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/nats/` throws. */
export type NatsErrorCode =
  | "creds_bad_format"
  | "creds_mismatch"
  | "creds_not_user"
  | "jwt_bad_alg"
  | "jwt_bad_claims"
  | "jwt_bad_encoding"
  | "jwt_bad_issuer"
  | "jwt_bad_signature"
  | "jwt_bad_subject"
  | "jwt_bad_version"
  | "jwt_expired"
  | "jwt_missing_field"
  | "jwt_not_yet_valid"
  | "jwt_too_large"
  | "jwt_wrong_type"
  | "nkey_bad_encoding"
  | "nkey_bad_length"
  | "nkey_bad_prefix"
  | "nkey_bad_seed"
  | "xkey_bad_key"
  | "xkey_bad_message"
  | "xkey_open_failed";
