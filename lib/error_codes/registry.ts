/**
 * The codes `lib/registry.ts` throws (see mod.ts).
 *
 * @module
 */

/** The codes `lib/registry.ts` throws. */
export type RegistryErrorCode =
  | "registry_bad_entry"
  | "registry_duplicate"
  | "registry_unknown";
