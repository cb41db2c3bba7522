/**
 * Flags and root resolution every mesh command shares: `--root`, the current dir's `.cotal`,
 * then the machine registry; port parsing.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { listMeshes, lookupMesh } from "../../workspace/mod.ts";

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
  // Another space may run (newcomer pass 10 read "no entry" for a typo in --space).
  const others = [...new Set((await listMeshes()).map((e) => e.space))].sort();
  throw new CotalError(
    "no_mesh",
    others.length
      ? `No mesh on this machine serves space '${space}' (there is no ./.cotal here); the ` +
        `running ones serve ${
          others.map((s) => `'${s}'`).join(", ")
        }: pass --space, or --root <dir>.`
      : `No mesh found for space '${space}': there is no ./.cotal here and the machine registry ` +
        "has no entry; pass --root <dir> or start one with 'cotal up'.",
  );
}

/**
 * The root of an existing mesh for commands that act on a whole root (status, down, doctor,
 * space list|rm|backup): `--root`, else `./.cotal` when it exists, else the one root the
 * machine's registry knows (the same way ps and send find a mesh from any directory). Several
 * registered roots and no `--root`: refused with their list.
 */
export async function resolveExistingRoot(flag: string | undefined): Promise<string> {
  if (flag !== undefined) return resolveRoot(flag);
  const local = resolveRoot(undefined);
  if ((await Deno.stat(local).catch(() => undefined))?.isDirectory) return local;
  const roots = [...new Set((await listMeshes()).map((e) => e.root))];
  if (roots.length === 1) return roots[0];
  if (roots.length > 1) {
    throw new CotalError(
      "several_meshes",
      `There is no ./.cotal here and this machine runs meshes under ${
        roots.join(", ")
      }; pass --root <dir> to pick one.`,
    );
  }
  return local;
}

/**
 * An agent's or the operator's actor as the CLI takes it: `upper_1`, or its principal
 * `local.upper_1` as `ps`, `send` and the logs print it (the owner of everything the CLI names
 * is `local`).
 */
export function localActor(text: string): string {
  const m = /^local\.([A-Za-z0-9_-]{1,64})$/.exec(text);
  return m ? m[1] : text;
}

/**
 * A path the user typed, absolute: relative to the directory they typed it in. `deno task`
 * runs commands in the project's directory and says where the user was in `INIT_CWD`, so
 * `cd docs && deno task cotal mint --out x.creds` writes `docs/x.creds`, not the checkout's.
 */
export function callerPath(path: string): string {
  if (path.startsWith("/")) return path;
  const base = Deno.env.get("INIT_CWD") || Deno.cwd();
  return `${base.replace(/\/+$/, "")}/${path}`;
}

/** The flags of a command that talks to a running space: its root, space and broker. */
export const TARGET_FLAGS = {
  ...ROOT_FLAG,
  space: { type: "string", default: "default", description: "the space" },
  server: {
    type: "string",
    value: "url",
    description: "the broker (default: the one this root runs)",
  },
} as const;

/** `--space <name>`, defaulting to `default`. */
export const SPACE_FLAG = {
  space: { type: "string", default: "default", description: "the space" },
} as const;
