/**
 * `deno task install-cli [--bin-dir <dir>]`: puts a `cotal` command on PATH for this checkout.
 *
 * It writes a two-line shell wrapper (mode 0755, atomically) that runs `cmd/cotal.ts` with this
 * Deno, under this checkout's `deno.json` and its frozen lockfile: `deno install -g` would copy
 * the config beside the wrapper and resolve a new, unfrozen lockfile, so the installed command
 * could load other package versions than the ones the suite ran.
 */
import { parseArgs } from "node:util";
import { writeFileAtomic } from "../lib/atomic_file.ts";

const checkout = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
let values: { "bin-dir"?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    args: Deno.args,
    options: { "bin-dir": { type: "string" }, help: { type: "boolean" } },
    strict: true,
  }));
} catch (err) {
  console.error(`${(err as Error).message}; usage: deno task install-cli [--bin-dir <dir>]`);
  Deno.exit(2);
}
if (values.help) {
  console.log("usage: deno task install-cli [--bin-dir <dir>]   (default: ~/.local/bin)");
  Deno.exit(0);
}
const home = Deno.env.get("HOME");
const binDir = values["bin-dir"] ?? (home ? `${home}/.local/bin` : undefined);
if (!binDir || !binDir.startsWith("/")) {
  console.error(
    `The bin dir must be an absolute path${
      binDir ? `, not '${binDir}'` : " (HOME is not set)"
    }; pass --bin-dir <dir>.`,
  );
  Deno.exit(2);
}
const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
// Under npx, Deno lives in npx's cache, which npm may clean at any time: the wrapper gets a copy
// in this checkout's own cache instead, so the command keeps working.
let deno = Deno.execPath();
if (deno.includes("/_npx/")) {
  const kept = `${checkout}/.cache/deno/deno`;
  await Deno.mkdir(`${checkout}/.cache/deno`, { recursive: true, mode: 0o755 });
  await Deno.copyFile(deno, `${kept}.tmp`);
  await Deno.chmod(`${kept}.tmp`, 0o755);
  await Deno.rename(`${kept}.tmp`, kept);
  console.log(`copied Deno out of npx's cache to ${kept} (npx may clean its cache)`);
  deno = kept;
}
const wrapper = `#!/bin/sh
exec ${quote(deno)} run --allow-all --config ${quote(`${checkout}/deno.json`)} ${
  quote(`${checkout}/cmd/cotal.ts`)
} "$@"
`;
await Deno.mkdir(binDir, { recursive: true, mode: 0o755 });
await writeFileAtomic(`${binDir}/cotal`, wrapper, { mode: 0o755, what: "The cotal command" });
console.log(`wrote ${binDir}/cotal (runs ${checkout}/cmd/cotal.ts with ${deno})`);
const onPath = (Deno.env.get("PATH") ?? "").split(":").includes(binDir);
if (!onPath) console.log(`${binDir} is not on PATH; add it: export PATH="${binDir}:$PATH"`);
