/**
 * `deno task compile`: one binary per executable, each with its row of the permission table
 * baked in for the release layout (`/var/lib/cotal`, broker on 127.0.0.1:4222, supervisors
 * signing through cotal-signer).
 *
 * `deno compile` needs its runtime, `denort`, which it downloads from Deno's servers unless
 * `DENORT_BIN` points at one. Where that download is unreachable this stops with one sentence.
 */
import { parseArgs } from "node:util";
import { denoCompileFlags, ENTRY_POINTS, EXECUTABLES, releaseLayout } from "../lib/permissions.ts";
import { denoTaskCommand } from "../lib/cli/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    root: { type: "string", default: "/var/lib/cotal" },
    broker: { type: "string", default: "127.0.0.1:4222" },
    out: { type: "string", default: "dist" },
    only: { type: "string" },
  },
  strict: true,
});

const layout = releaseLayout(values.root!, values.broker!.split(","));
const targets = values.only ? values.only.split(",") : [...EXECUTABLES];
await Deno.mkdir(values.out!, { recursive: true });
for (const exe of targets) {
  if (!(EXECUTABLES as readonly string[]).includes(exe)) {
    console.error(`Unknown executable '${exe}'; choose from ${EXECUTABLES.join(", ")}.`);
    Deno.exit(2);
  }
  const name = exe as typeof EXECUTABLES[number];
  const flags = denoCompileFlags(name, layout, values.out!);
  const entry = new URL(`../${ENTRY_POINTS[name]}`, import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["compile", ...flags, entry],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  if (!out.success) {
    if (!Deno.env.get("DENORT_BIN") && /denort|dl\.deno\.land|Download/.test(err)) {
      console.error(
        "deno compile could not download its runtime (denort) from Deno's servers, which this " +
          "machine cannot reach; set DENORT_BIN to the path of a denort binary for Deno " +
          `${Deno.version.deno} and run '${denoTaskCommand("compile")}' again.`,
      );
      Deno.exit(1);
    }
    console.error(
      `deno compile failed for ${exe}:\n${err.trim().split("\n").slice(0, 6).join("\n")}`,
    );
    Deno.exit(1);
  }
  console.log(`built ${values.out}/${exe}`);
}
