/**
 * Finding and provisioning bubblewrap, the OS sandbox agent runners are started in.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { fetchDebBinary } from "../../debian/mod.ts";
import { projectCacheDir } from "../../project_cache.ts";

/** Where a bwrap binary was found. */
export interface FoundBwrap {
  path: string;
  source: "env" | "path" | "cache";
}

/** Options for {@linkcode ensureBwrap}. */
export interface EnsureBwrapOptions {
  cacheDir?: string;
  /** Where apt's configuration lives; tests point this at sample files. */
  etcApt?: string;
  onProgress?: (line: string) => void;
}

/** How to get bubblewrap by hand, or run without it; ends every provisioning error. */
export const BWRAP_MANUAL: string =
  "install bubblewrap (Debian/Ubuntu: 'apt-get install bubblewrap'; Fedora: 'dnf install " +
  "bubblewrap') and put bwrap on PATH or in COTAL_BWRAP, or start untrusted agents with " +
  "isolation 'deno-only' to accept Deno permissions as the only layer";

/** The path {@linkcode ensureBwrap} installs to. */
export function cachedBwrapPath(cacheDir = projectCacheDir()): string {
  return `${cacheDir}/bwrap/bin/bwrap`;
}

function isExecutable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * Finds bwrap: `COTAL_BWRAP` first (an explicit choice is never second-guessed: a missing file
 * throws `bwrap_not_found` rather than falling back), then PATH, then the project cache.
 * Returns undefined when there is none.
 */
export function findBwrap(cacheDir = projectCacheDir()): FoundBwrap | undefined {
  const explicit = Deno.env.get("COTAL_BWRAP");
  if (explicit) {
    if (!isExecutable(explicit)) {
      throw new CotalError(
        "bwrap_not_found",
        `COTAL_BWRAP is ${explicit}, which is not an executable file; point it at bwrap or unset it.`,
      );
    }
    return { path: explicit, source: "env" };
  }
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && isExecutable(`${dir}/bwrap`)) return { path: `${dir}/bwrap`, source: "path" };
  }
  const cached = cachedBwrapPath(cacheDir);
  return isExecutable(cached) ? { path: cached, source: "cache" } : undefined;
}

/**
 * Runs the smallest sandbox the supervisor needs (read-only root, a tmpfs, a private /proc in a
 * new PID namespace) and returns undefined when it works, or the reason it does not: bwrap can
 * be present yet unusable (no user namespaces for non-root, a seccomp policy in a container).
 */
export async function probeBwrap(path: string): Promise<string | undefined> {
  const dir = await Deno.makeTempDir({ prefix: "cotal-bwrap-probe-" });
  try {
    const out = await new Deno.Command(path, {
      args: [
        "--ro-bind",
        "/",
        "/",
        "--tmpfs",
        dir,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--unshare-pid",
        "--die-with-parent",
        "--",
        "true",
      ],
      stdout: "null",
      stderr: "piped",
      clearEnv: true,
    }).output();
    if (out.success) return undefined;
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").at(-1);
    return `${path} exited ${out.code}${err ? ` (${err})` : ""}`;
  } catch (err) {
    return `${path} could not run (${(err as Error).message})`;
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * The Debian suite to take bwrap from: this machine's own release when it is Debian (a binary
 * from a newer suite needs a newer glibc: on bookworm, stable's bwrap fails with
 * "GLIBC_2.38 not found"), else `stable`.
 */
export function bwrapSuites(osRelease?: string): string[] {
  let text = osRelease;
  if (text === undefined) {
    try {
      text = Deno.readTextFileSync("/etc/os-release");
    } catch {
      text = "";
    }
  }
  const id = /^ID=["']?([^"'\n]+)/m.exec(text)?.[1];
  const codename = /^VERSION_CODENAME=["']?([^"'\n]+)/m.exec(text)?.[1];
  return id === "debian" && codename ? [codename] : ["stable"];
}

/**
 * Installs bwrap into the project cache from Debian's `bubblewrap` package through the
 * machine's configured mirror, without touching the system, and keeps it only if a probe
 * sandbox runs (`bwrap_unusable` otherwise, with the reason).
 */
export async function installBwrap(opts: EnsureBwrapOptions = {}): Promise<FoundBwrap> {
  const cacheDir = opts.cacheDir ?? projectCacheDir();
  const target = cachedBwrapPath(cacheDir);
  // Each install stages its own file: two at once (parallel callers on a fresh cache) must
  // never write into the inode the other one renames into place.
  const staged = `${target}.new-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  await fetchDebBinary({
    pkg: "bubblewrap",
    inside: ["usr/bin/bwrap"],
    target: staged,
    aptDir: `${cacheDir}/bwrap/apt`,
    suites: bwrapSuites(),
    manual: BWRAP_MANUAL,
    etcApt: opts.etcApt,
    onProgress: opts.onProgress,
  });
  const problem = await probeBwrap(staged);
  if (problem) {
    await Deno.remove(staged).catch(() => {});
    throw new CotalError(
      "bwrap_unusable",
      `The bwrap fetched from Debian does not run here: ${problem}; ${BWRAP_MANUAL}.`,
    );
  }
  await Deno.rename(staged, target);
  opts.onProgress?.(`installed bwrap at ${target}`);
  return { path: target, source: "cache" };
}

/** Finds bwrap, installing it into the project cache when absent. */
export async function ensureBwrap(opts: EnsureBwrapOptions = {}): Promise<FoundBwrap> {
  return findBwrap(opts.cacheDir) ?? await installBwrap(opts);
}
