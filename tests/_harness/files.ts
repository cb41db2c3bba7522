/**
 * Waiting on files an agent writes: a plain write is not atomic, so a file that exists may still
 * be empty or cut short. These report ready only once the content is whole.
 */

/** True once `path` holds a whole JSON document (an agent's report). */
export async function jsonFileReady(path: string): Promise<boolean> {
  try {
    JSON.parse(await Deno.readTextFile(path));
    return true;
  } catch {
    return false;
  }
}

/** True once `path` holds a whole line (text that ends in a newline, as `pwd > f` writes). */
export async function lineFileReady(path: string): Promise<boolean> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return text.trim() !== "" && text.endsWith("\n");
}
