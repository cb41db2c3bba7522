import { CotalError } from "../errors.ts";
import { isSupportedVersion, parseServerVersion, type ServerVersion } from "./version.ts";
import { projectCacheDir } from "../project_cache.ts";

/** Where a usable nats-server was found, and which version it is. */
export interface FoundServer {
  path: string;
  version: ServerVersion;
  source: "env" | "path" | "cache";
}

/** The path the installer writes nats-server to. */
export function cachedServerPath(cacheDir = projectCacheDir()): string {
  return `${cacheDir}/nats-server/bin/nats-server`;
}

/** Runs `<path> --version` and parses it; throws a sentence naming the binary when it cannot. */
export async function probeServerVersion(path: string): Promise<ServerVersion> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(path, { args: ["--version"], stdout: "piped", stderr: "piped" })
      .output();
  } catch (err) {
    throw new CotalError(
      "broker_not_runnable",
      `Could not run ${path} --version (${(err as Error).message}); point NATS_SERVER at a ` +
        "working nats-server binary.",
    );
  }
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return parseServerVersion(text);
}

/** Refuses a server older than 2.10 with a sentence naming what was found. */
export function assertSupported(path: string, version: ServerVersion): void {
  if (!isSupportedVersion(version)) {
    throw new CotalError(
      "broker_too_old",
      `${path} is nats-server ${version.text}, but Cotal needs 2.10 or newer (auth callout); ` +
        "install a newer one or unset NATS_SERVER to let Cotal install one into its cache.",
    );
  }
}

function whichOnPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (!dir) continue;
    const candidate = `${dir}/${name}`;
    try {
      const st = Deno.statSync(candidate);
      if (st.isFile && (st.mode ?? 0) & 0o111) return candidate;
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

/**
 * Finds nats-server: `NATS_SERVER` first (an explicit choice is never second-guessed: when it
 * is too old this throws rather than falling back), then PATH, then the project cache. Returns
 * undefined when none is present; throws when the one found is unusable.
 */
export async function findServer(cacheDir = projectCacheDir()): Promise<FoundServer | undefined> {
  const explicit = Deno.env.get("NATS_SERVER");
  if (explicit) {
    const version = await probeServerVersion(explicit);
    assertSupported(explicit, version);
    return { path: explicit, version, source: "env" };
  }
  const onPath = whichOnPath("nats-server");
  if (onPath) {
    const version = await probeServerVersion(onPath);
    // A too-old system binary is skipped in favour of the cache, never used.
    if (isSupportedVersion(version)) return { path: onPath, version, source: "path" };
  }
  const cached = cachedServerPath(cacheDir);
  try {
    Deno.statSync(cached);
  } catch {
    return undefined;
  }
  const version = await probeServerVersion(cached);
  assertSupported(cached, version);
  return { path: cached, version, source: "cache" };
}
