/**
 * How the operator runs `cotal` on this machine, for the commands Cotal tells them to type: the
 * installed `cotal` when one is on PATH, else the npx form that needs nothing installed.
 *
 * @module
 */

/** True when an executable `name` is on `path` (PATH's dirs). */
function onPath(path: string, name = "cotal"): boolean {
  for (const dir of path.split(":").filter(Boolean)) {
    try {
      const st = Deno.statSync(`${dir}/${name}`);
      if (st.isFile && ((st.mode ?? 0o111) & 0o111)) return true;
    } catch {
      // Not in this dir (or unreadable).
    }
  }
  return false;
}

/**
 * `cotal`, or `npx -y deno@<this Deno> task cotal` when no `cotal` is on PATH (an operator who
 * only has npx, as the README's first session allows).
 */
export function cotalCommand(path = Deno.env.get("PATH") ?? ""): string {
  return onPath(path) ? "cotal" : `npx -y deno@${Deno.version.deno} task cotal`;
}

/**
 * `deno task <task>`, or its npx form when no `deno` is on PATH (newcomer pass 10, with only
 * npx, was told to run `deno task compile`).
 */
export function denoTaskCommand(task: string, path = Deno.env.get("PATH") ?? ""): string {
  return `${onPath(path, "deno") ? "deno" : `npx -y deno@${Deno.version.deno}`} task ${task}`;
}
