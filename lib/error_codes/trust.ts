/**
 * The codes `lib/trust/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/trust/` throws. */
export type TrustErrorCode =
  | "account_mismatch"
  | "corrupt_trust_record"
  | "creds_bad_format"
  | "creds_mismatch"
  | "creds_too_large"
  | "duplicate_account"
  | "foreign_account"
  | "invalid_account"
  | "invalid_channel"
  | "invalid_cluster"
  | "invalid_conn_id"
  | "invalid_identity"
  | "invalid_include"
  | "invalid_label"
  | "invalid_lifecycle_uid"
  | "invalid_lifetime"
  | "invalid_mint_option"
  | "invalid_monitor"
  | "invalid_operator"
  | "invalid_port"
  | "invalid_principal"
  | "invalid_role"
  | "invalid_signing_key"
  | "invalid_signing_seed"
  | "invalid_tls"
  | "missing_deprovision_target"
  | "missing_operator"
  | "missing_operator_seed"
  | "missing_permissions"
  | "missing_signing_seed"
  | "missing_store_dir"
  | "missing_sys_seed"
  | "mixed_tls"
  | "no_spaces"
  | "operator_mismatch"
  | "permission_too_broad"
  | "stale_signing_key"
  | "stripped_bundle"
  | "sys_mismatch"
  | "unknown_profile"
  | "wrong_space";
