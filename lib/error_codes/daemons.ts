/**
 * The codes `cmd/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `cmd/` throws. */
export type DaemonErrorCode = "usage";
