/**
 * The codes `lib/debian/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/debian/` throws. */
export type DebianErrorCode =
  | "install_failed"
  | "install_no_apt"
  | "install_no_mirror";
