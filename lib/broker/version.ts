import { CotalError } from "../errors.ts";

/** The oldest nats-server Cotal runs on: auth callout in operator mode arrived in 2.10. */
export const MIN_NATS_SERVER_VERSION = Object.freeze([2, 10, 0] as const);

/** A parsed `major.minor.patch` version. */
export interface ServerVersion {
  major: number;
  minor: number;
  patch: number;
  /** The text it was parsed from, for messages. */
  text: string;
}

/**
 * Parses the version out of `nats-server --version` output (`nats-server: v2.10.27`) or a
 * Debian package version (`2.10.27-1+b2`).
 */
export function parseServerVersion(output: string): ServerVersion {
  const m = output.match(/v?(\d+)\.(\d+)\.(\d+)/);
  if (!m) {
    throw new CotalError(
      "broker_version_unparsable",
      `Could not find a version in ${JSON.stringify(output.trim().slice(0, 80))}; ` +
        "expected output like 'nats-server: v2.10.27'.",
    );
  }
  return { major: +m[1], minor: +m[2], patch: +m[3], text: `${m[1]}.${m[2]}.${m[3]}` };
}

/** Orders two versions: negative when `a` is older than `b`. */
export function compareVersions(a: ServerVersion, b: ServerVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch;
}

/** True when `v` is at least {@linkcode MIN_NATS_SERVER_VERSION}. */
export function isSupportedVersion(v: ServerVersion): boolean {
  const [major, minor, patch] = MIN_NATS_SERVER_VERSION;
  return compareVersions(v, { major, minor, patch, text: "" }) >= 0;
}
