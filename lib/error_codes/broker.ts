/**
 * The codes `lib/broker/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/broker/` throws. */
export type BrokerErrorCode =
  | "broker_exited"
  | "broker_not_ready"
  | "broker_not_runnable"
  | "broker_reload_failed"
  | "broker_too_old"
  | "broker_version_unparsable";
