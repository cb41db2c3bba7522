import { fetchDebBinary } from "../debian/mod.ts";
import * as find from "./find.ts";
import { projectCacheDir } from "../project_cache.ts";

/** Options for {@linkcode installServer}. */
export interface InstallOptions {
  cacheDir?: string;
  /** Where apt's configuration lives; tests point this at sample files. */
  etcApt?: string;
  /** Called with one line per step (downloading lists, fetching the package, ...). */
  onProgress?: (line: string) => void;
}

// Newest first: apt's candidate is the highest version across these, so the newest suite that
// carries nats-server wins. COTAL_NATS_SUITE narrows it (e.g. "stable" for 2.10.x).
const SUITES = ["unstable", "testing", "stable"];

const MANUAL =
  "install nats-server 2.10 or newer yourself (Debian/Ubuntu: 'apt-get install nats-server'; " +
  "or a release binary) and put it on PATH or in NATS_SERVER";

/**
 * Installs nats-server into the project cache without touching the system, from the machine's
 * configured Debian mirror, and verifies its `--version` before it is used.
 */
export async function installServer(opts: InstallOptions = {}): Promise<find.FoundServer> {
  const cacheDir = opts.cacheDir ?? projectCacheDir();
  const target = find.cachedServerPath(cacheDir);
  const staged = `${target}.new`;
  await fetchDebBinary({
    pkg: "nats-server",
    // Debian ships it in /usr/sbin from 2.11 on and in /usr/bin before.
    inside: ["usr/sbin/nats-server", "usr/bin/nats-server"],
    target: staged,
    aptDir: `${cacheDir}/nats-server/apt`,
    suites: Deno.env.get("COTAL_NATS_SUITE")?.split(",") ?? SUITES,
    manual: MANUAL,
    etcApt: opts.etcApt,
    onProgress: opts.onProgress,
  });
  const version = await find.probeServerVersion(staged);
  try {
    find.assertSupported(staged, version);
  } catch (err) {
    await Deno.remove(staged).catch(() => {});
    throw err;
  }
  await Deno.rename(staged, target);
  opts.onProgress?.(`installed nats-server ${version.text} at ${target}`);
  return { path: target, version, source: "cache" };
}

/** Finds nats-server, installing it into the project cache when absent. */
export async function ensureServer(opts: InstallOptions = {}): Promise<find.FoundServer> {
  return await find.findServer(opts.cacheDir) ?? await installServer(opts);
}
