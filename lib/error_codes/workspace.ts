/**
 * The codes `lib/workspace/` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/workspace/` throws. */
export type WorkspaceErrorCode =
  | "doctor_needs_spaces"
  | "holder_lock_unavailable"
  | "holder_lock_unsafe"
  | "mesh_ambiguous"
  | "no_home"
  | "no_space_auth"
  | "remint_failed"
  | "space_auth_unreadable"
  | "store_bad_composition"
  | "store_bad_key"
  | "store_bad_root"
  | "store_bad_space"
  | "store_io"
  | "store_nonconformant"
  | "store_not_dir"
  | "store_not_file"
  | "store_symlink"
  | "wrong_space";
