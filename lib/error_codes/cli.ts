/**
 * The codes `lib/cli/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/cli/` throws. */
export type CliErrorCode =
  | "cli_bad_spec"
  | "usage";
