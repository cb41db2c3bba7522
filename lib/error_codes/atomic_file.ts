/**
 * The codes `lib/atomic_file.ts` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/atomic_file.ts` throws. */
export type AtomicFileErrorCode =
  | "dir_missing"
  | "disk_full"
  | "file_exists"
  | "file_not_own"
  | "is_directory"
  | "not_directory"
  | "permission_denied"
  | "read_only"
  | "write_failed";
