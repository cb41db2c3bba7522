/**
 * The project-local cache where Cotal installs the tools it fetches (nats-server, bwrap).
 *
 * @module
 */

/** The project-local cache (gitignored): `COTAL_CACHE_DIR`, else `<checkout>/.cache`. */
export function projectCacheDir(): string {
  const fromEnv = Deno.env.get("COTAL_CACHE_DIR");
  if (fromEnv) return fromEnv;
  return new URL("../.cache", import.meta.url).pathname;
}
