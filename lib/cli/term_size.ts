/**
 * Terminal sizes for the commands that drive one (`cotal attach`): as typed, and as this
 * terminal reports it.
 *
 * @module
 */
import { CotalError } from "../errors.ts";

/** `--size COLSxROWS`, refused with a sentence when malformed; undefined when not given. */
export function parseSize(text: string | undefined): { cols: number; rows: number } | undefined {
  if (text === undefined) return undefined;
  const m = /^(\d{1,4})x(\d{1,4})$/.exec(text);
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) {
    throw new CotalError("usage", `--size must look like 120x32, not '${text}'.`);
  }
  return { cols: Number(m[1]), rows: Number(m[2]) };
}

/** This terminal's size, or undefined when stdout is not one. */
export function consoleSize(): { cols: number; rows: number } | undefined {
  try {
    const s = Deno.consoleSize();
    return { cols: s.columns, rows: s.rows };
  } catch {
    return undefined;
  }
}
