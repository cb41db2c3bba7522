/**
 * `cotal` as a real process, for tests that drive the CLI: `--root` goes before any `--` (after
 * it, it would be the spawned program's argument), and a non-zero exit fails the test with what
 * the command printed.
 */
import assert from "node:assert/strict";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

/** What one `cotal` run printed. */
export interface CotalRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** A runner of `cotal <args> --root <root>` that asserts a zero exit. */
export function cotalIn(root: string): (...args: string[]) => Promise<CotalRun> {
  return async (...args: string[]) => {
    const end = args.indexOf("--");
    const withRoot = end < 0
      ? [...args, "--root", root]
      : [...args.slice(0, end), "--root", root, ...args.slice(end)];
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, ...withRoot],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const r = {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
    };
    assert.equal(r.code, 0, `cotal ${args.join(" ")}: ${r.stderr}${r.stdout}`);
    return r;
  };
}

/** Runs `cotal <args> --root <root>` for clean-up: output dropped, the exit not checked. */
export async function cotalQuietly(root: string, ...args: string[]): Promise<void> {
  await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args, "--root", root],
    stdout: "null",
    stderr: "null",
  }).output();
}
