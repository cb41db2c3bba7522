import { CotalError } from "../../errors.ts";
import { lookupMesh } from "../machine_registry.ts";

/** The `--root` flag every mesh command takes. */
export const ROOT_FLAG = {
  root: {
    type: "string",
    value: "dir",
    description: "the state directory (default: ./.cotal)",
  },
} as const;

/** The state directory a command works on. */
export function resolveRoot(flag: string | undefined): string {
  const root = flag ?? `${Deno.cwd()}/.cotal`;
  return root.startsWith("/") ? root : `${Deno.cwd()}/${root}`;
}

/** A TCP port from a flag, refused with a sentence when it is not one. */
export function parsePort(text: string, flag = "--port"): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new CotalError(
      "usage",
      `${flag} must be a whole number from 1 to 65535, not '${text}'; run 'cotal up --help'.`,
    );
  }
  return port;
}

/**
 * The root a command works on: `--root`, else `./.cotal` when it exists, else the root the
 * machine's mesh registry records for the space (so any directory finds a running mesh).
 */
export async function resolveMeshRoot(flag: string | undefined, space: string): Promise<string> {
  if (flag !== undefined) return resolveRoot(flag);
  const local = resolveRoot(undefined);
  try {
    if ((await Deno.stat(local)).isDirectory) return local;
  } catch {
    // No local root: ask the machine registry.
  }
  const entry = await lookupMesh(space);
  if (entry) return entry.root;
  throw new CotalError(
    "no_mesh",
    `No mesh found for space '${space}': there is no ./.cotal here and the machine registry ` +
      "has no entry; pass --root <dir> or start one with 'cotal up'.",
  );
}
