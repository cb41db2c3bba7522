/**
 * The machine's registry of running meshes (`~/.cotal/meshes/`, or `COTAL_HOME`): which root and
 * broker URL serve a space, so a command run from any directory finds the mesh.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import { spaceKeyHex } from "../workspace/mod.ts";

/** One space's entry in the machine's mesh registry. */
export interface MeshEntry {
  space: string;
  root: string;
  url: string;
  updatedAt: string;
}

/** The machine home: `COTAL_HOME`, else `$HOME/.cotal`. */
export function machineHome(): string {
  const env = Deno.env.get("COTAL_HOME");
  if (env) return env;
  const home = Deno.env.get("HOME");
  if (!home) {
    throw new CotalError(
      "no_home",
      "Neither COTAL_HOME nor HOME is set; set COTAL_HOME to a directory for Cotal's registry.",
    );
  }
  return `${home}/.cotal`;
}

function entryPath(space: string): string {
  return `${machineHome()}/meshes/space.${spaceKeyHex(space)}.json`;
}

/** Records where a space's mesh runs, atomically (0600 in a 0700 dir). */
export async function registerMesh(entry: Omit<MeshEntry, "updatedAt">): Promise<void> {
  const dir = `${machineHome()}/meshes`;
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const path = entryPath(entry.space);
  const full: MeshEntry = { ...entry, updatedAt: new Date().toISOString() };
  await writeFileAtomic(path, JSON.stringify(full, null, 2) + "\n", {
    what: "The machine's mesh registry entry",
  });
}

/** Removes a space's entry when it names this root (another root's entry is left alone). */
export async function unregisterMesh(space: string, root: string): Promise<void> {
  const e = await lookupMesh(space);
  if (e?.root === root) await Deno.remove(entryPath(space)).catch(() => {});
}

/** Where a space's mesh runs, from any directory; undefined when unknown. */
export async function lookupMesh(space: string): Promise<MeshEntry | undefined> {
  try {
    const v = JSON.parse(await Deno.readTextFile(entryPath(space)));
    if (typeof v.root === "string" && typeof v.url === "string" && v.space === space) return v;
  } catch {
    // Absent or unreadable: not registered.
  }
  return undefined;
}

/** Every registered mesh of this machine (entries that cannot be read are skipped). */
export async function listMeshes(): Promise<MeshEntry[]> {
  const out: MeshEntry[] = [];
  let names: string[];
  try {
    names = [...Deno.readDirSync(`${machineHome()}/meshes`)].map((e) => e.name);
  } catch {
    return out;
  }
  for (const n of names.filter((n) => /^space\.[0-9a-f]{32}\.json$/.test(n)).sort()) {
    try {
      const v = JSON.parse(await Deno.readTextFile(`${machineHome()}/meshes/${n}`));
      if (typeof v.root === "string" && typeof v.space === "string") out.push(v);
    } catch {
      // Unreadable: skipped.
    }
  }
  return out;
}
