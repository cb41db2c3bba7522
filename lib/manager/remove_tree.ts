/**
 * Removing a directory an agent could write, whatever it left there. Deno's recursive remove
 * recurses once per level: a deno-only agent built a tree 30,000 levels deep in its home (each
 * path it named under PATH_MAX, by renaming one chain into the bottom of the next), and the
 * supervisor's teardown overflowed its stack and aborted, at every start after (red team 26).
 * This walk keeps its own stack, never follows a link, and moves a subtree whose path grows
 * long up beside the top, where its path is short again, so any depth is removed.
 *
 * @module
 */

/**
 * A path longer than this is moved up before it is read: well under Linux's 4096, and short, as
 * the kernel walks every component of a path at each step.
 */
const HOIST_AT = 256;

/**
 * Removes `dir` and everything in it, checking `deadline` (epoch ms) between steps; resolves
 * with why it stopped short, or undefined once `dir` is gone (or was never there).
 */
export async function removeTree(dir: string, deadline: number): Promise<string | undefined> {
  const stack: { path: string; read: boolean }[] = [{ path: dir, read: false }];
  // Synchronous steps (a tenth of the async ones' cost: 30,000 levels in about a second),
  // giving the event loop a turn every few milliseconds.
  let slice = performance.now();
  while (stack.length > 0) {
    if (performance.now() - slice > 5) {
      await new Promise((r) => setTimeout(r, 0));
      slice = performance.now();
    }
    if (Date.now() > deadline) return "timed out";
    const top = stack[stack.length - 1];
    try {
      if (top.read) {
        // Its entries were removed above it on the stack: it is empty now.
        Deno.removeSync(top.path);
        stack.pop();
        continue;
      }
      top.read = true;
      if (stack.length === 1 && !Deno.lstatSync(top.path).isDirectory) {
        Deno.removeSync(top.path);
        stack.pop();
        continue;
      }
      // Read whole before anything moves out of it.
      for (const e of [...Deno.readDirSync(top.path)]) {
        const path = `${top.path}/${e.name}`;
        // A link (to anything) is a name to unlink; a file too.
        if (!e.isDirectory) {
          Deno.removeSync(path);
        } else if (path.length > HOIST_AT) {
          const moved = `${dir}/.cotal-removing-${crypto.randomUUID()}`;
          Deno.renameSync(path, moved);
          stack.push({ path: moved, read: false });
        } else stack.push({ path, read: false });
      }
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        stack.pop();
        continue;
      }
      return (err as Error).name;
    }
  }
  return undefined;
}
