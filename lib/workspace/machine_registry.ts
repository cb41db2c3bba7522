/**
 * The machine's registry of running meshes (`~/.cotal/meshes/`, or `COTAL_HOME`): which root and
 * broker URL serve a space, so a command run from any directory finds the mesh.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import { spaceKeyHex } from "./keys.ts";

/** One space's entry in the machine's mesh registry. */
export interface MeshEntry {
  space: string;
  root: string;
  url: string;
  updatedAt: string;
}

/**
 * The machine home: `COTAL_HOME`, else `$HOME/.cotal`. Every function here also takes a `home`
 * of its own, for an embedder (or a test) that keeps its registry apart without touching the
 * process's environment, which every part of the process shares.
 */
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

/**
 * An entry's file: one per space and root, so two roots that each run a space of one name do not
 * overwrite each other's entry (and stopping one does not lose the other).
 */
function entryPath(home: string, space: string, root: string): string {
  const rootKey = spaceKeyHex(root).slice(0, 16);
  return `${home}/meshes/space.${spaceKeyHex(space)}.${rootKey}.json`;
}

/** The entry file the first registry kept per space alone (read, and removed when it is ours). */
function legacyPath(home: string, space: string): string {
  return `${home}/meshes/space.${spaceKeyHex(space)}.json`;
}

const ENTRY_FILE = /^space\.[0-9a-f]{32}(\.[0-9a-f]{16})?\.json$/;

async function readEntry(path: string): Promise<MeshEntry | undefined> {
  try {
    const v = JSON.parse(await Deno.readTextFile(path));
    if (typeof v.root === "string" && typeof v.url === "string" && typeof v.space === "string") {
      return v;
    }
  } catch {
    // Absent or unreadable: not registered.
  }
  return undefined;
}

/** Records where a space's mesh runs, atomically (0600 in a 0700 dir). */
export async function registerMesh(
  entry: Omit<MeshEntry, "updatedAt">,
  home: string = machineHome(),
): Promise<void> {
  await Deno.mkdir(`${home}/meshes`, { recursive: true, mode: 0o700 });
  const full: MeshEntry = { ...entry, updatedAt: new Date().toISOString() };
  const path = entryPath(home, entry.space, entry.root);
  await writeFileAtomic(path, JSON.stringify(full, null, 2) + "\n", {
    what: "The machine's mesh registry entry",
  });
  if ((await readEntry(legacyPath(home, entry.space)))?.root === entry.root) {
    await Deno.remove(legacyPath(home, entry.space)).catch(() => {});
  }
}

/** Removes this root's entry for a space (another root's is left alone). */
export async function unregisterMesh(
  space: string,
  root: string,
  home: string = machineHome(),
): Promise<void> {
  await Deno.remove(entryPath(home, space, root)).catch(() => {});
  if ((await readEntry(legacyPath(home, space)))?.root === root) {
    await Deno.remove(legacyPath(home, space)).catch(() => {});
  }
}

/**
 * Where a space's mesh runs, from any directory; undefined when unknown. Refuses with
 * `mesh_ambiguous` when several roots run a space of that name: the caller names one.
 */
export async function lookupMesh(
  space: string,
  home: string = machineHome(),
): Promise<MeshEntry | undefined> {
  let found = (await listMeshes(home)).filter((e) => e.space === space);
  if (found.length > 1) {
    // Entries a crashed root left behind: only those whose broker answers count.
    const live = (await Promise.all(found.map(async (e) => (await answers(e.url)) ? e : undefined)))
      .filter((e): e is MeshEntry => e !== undefined);
    found = live.length ? live : found.sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
    if (!live.length) found = found.slice(0, 1);
  }
  const roots = [...new Set(found.map((e) => e.root))];
  if (roots.length > 1) {
    throw new CotalError(
      "mesh_ambiguous",
      `Space '${space}' runs under ${roots.length} roots (${
        roots.join(", ")
      }); pass --root <dir> to say which.`,
    );
  }
  return found[0];
}

/** Whether a broker accepts a TCP connection at `url` within half a second. */
async function answers(url: string): Promise<boolean> {
  const m = /^(?:[a-z]+:\/\/)?\[?([^\]/]*?)\]?:(\d+)/.exec(url);
  if (!m) return false;
  const timer = AbortSignal.timeout(500);
  try {
    const conn = await Promise.race([
      Deno.connect({ hostname: m[1] || "127.0.0.1", port: Number(m[2]) }),
      new Promise<never>((_, reject) => timer.addEventListener("abort", () => reject(new Error()))),
    ]);
    conn.close();
    return true;
  } catch {
    return false;
  }
}

/** Every registered mesh of this machine (entries that cannot be read are skipped). */
export async function listMeshes(home: string = machineHome()): Promise<MeshEntry[]> {
  const out: MeshEntry[] = [];
  let names: string[];
  try {
    names = [...Deno.readDirSync(`${home}/meshes`)].map((e) => e.name);
  } catch {
    return out;
  }
  for (const n of names.filter((n) => ENTRY_FILE.test(n)).sort()) {
    const e = await readEntry(`${home}/meshes/${n}`);
    if (e) out.push(e);
  }
  return out;
}
