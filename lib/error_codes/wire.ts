/**
 * The codes `lib/wire/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/wire/` throws. */
export type WireErrorCode =
  | "broker_connect_failed"
  | "durable_conflict"
  | "invalid_channel"
  | "invalid_channel_config"
  | "invalid_ctl_service"
  | "invalid_delivery_class"
  | "invalid_message"
  | "invalid_plane"
  | "invalid_principal"
  | "jetstream_failed"
  | "lifecycle_still_live"
  | "message_too_large"
  | "missing_servers"
  | "not_connected"
  | "permission_denied"
  | "registry_contended"
  | "registry_corrupt"
  | "space_mismatch"
  | "stream_config_conflict"
  | "subscribe_outside_acl";
