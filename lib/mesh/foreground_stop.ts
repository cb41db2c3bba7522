/**
 * How `cotal down --keep-agents` stops a foreground `up`: a foreground up heals its stack, so
 * down asks it to stop first (SIGTERM), and its stop is a down of its own. Whether that down
 * keeps the agents is said in a file under the root's run dir naming the up's pid, which the up
 * takes as it stops; a file naming another process is ignored and removed.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { meshPaths } from "./layout.ts";

/** The file a `down --keep-agents` leaves for the foreground up it stops: that up's pid. */
function keepAgentsFile(root: string): string {
  return `${meshPaths(root).runDir}/down-keep-agents`;
}

export async function askToKeepAgents(root: string, pid: number): Promise<void> {
  await writeFileAtomic(keepAgentsFile(root), String(pid));
}

/** Whether a `down --keep-agents` asked this process to keep the agents (the file is taken). */
export async function keepAgentsAsked(root: string): Promise<boolean> {
  const file = keepAgentsFile(root);
  const said = await Deno.readTextFile(file).catch(() => undefined);
  if (said === undefined) return false;
  await Deno.remove(file).catch(() => {});
  return said.trim() === String(Deno.pid);
}
