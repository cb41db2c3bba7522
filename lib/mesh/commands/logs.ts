/**
 * `cotal logs [component]`: the newest lines of one component's log, named as `status` names it
 * (`nats-server`, `watchdog`, `delivery.default`, `supervise.default`, `signer.default`). The
 * files are named by the space's hash (`logs/delivery.<hex>.log`); nobody should have to map
 * them by hand. With no component, the list of logs there are.
 *
 * @module
 */
import { cotalCommand, defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { safeText } from "../../safe_text.ts";
import { CotalError } from "../../errors.ts";
import { registry } from "../../registry.ts";
import { spaceKeyHex } from "../../workspace/mod.ts";
import { meshPaths } from "../layout.ts";
import { componentFiles } from "../stack.ts";
import { readSpaceIndex } from "../trust_state.ts";
import { resolveExistingRoot, ROOT_FLAG } from "./common.ts";

/** The most of a log read for its tail (a log is capped at 32 MiB). */
const TAIL_BYTES = 1024 * 1024;

/** Each log of the root, by the name `status` gives its component. */
async function logsByName(root: string): Promise<Map<string, string>> {
  const { spaces } = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
  const byHex = new Map(spaces.map((s) => [spaceKeyHex(s), s]));
  const out = new Map<string, string>();
  let entries: Deno.DirEntry[] = [];
  try {
    entries = await Array.fromAsync(Deno.readDir(meshPaths(root).logDir));
  } catch {
    // No logs yet.
  }
  for (const e of entries) {
    if (!e.isFile || !e.name.endsWith(".log")) continue;
    const id = e.name.slice(0, -".log".length);
    const [kind, hex] = id.split(".");
    const space = hex ? byHex.get(hex) : undefined;
    if (hex && !space) continue;
    const file = componentFiles(root, id).logFile;
    out.set(space ? `${kind}.${space}` : id, file);
    // Also by its id, as --json, the watchdog and the file names say it.
    if (space) out.set(id, file);
  }
  return out;
}

/** The last `n` lines of `path`, read from at most its last megabyte. */
async function tail(path: string, n: number): Promise<string[]> {
  using f = await Deno.open(path, { read: true });
  const size = (await f.stat()).size;
  const from = Math.max(0, size - TAIL_BYTES);
  await f.seek(from, Deno.SeekMode.Start);
  const buf = new Uint8Array(size - from);
  let got = 0;
  while (got < buf.length) {
    const r = await f.read(buf.subarray(got));
    if (r === null) break;
    got += r;
  }
  const lines = new TextDecoder().decode(buf.subarray(0, got)).split("\n");
  if (lines.at(-1) === "") lines.pop();
  // A cut first line is not shown half.
  if (from > 0) lines.shift();
  return lines.slice(-n);
}

/** `cotal logs <component>`. */
export const logsCommand = defineCommand({
  kind: "command",
  name: "logs",
  summary: "show the newest lines of one component's log (named as status names it)",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    lines: { type: "string", value: "n", description: "how many lines (default 50)" },
  },
  positionals: [{
    name: "component",
    description:
      "nats-server, watchdog, or <kind>.<space> such as delivery.default (none: list the logs)",
  }],
  async run({ values, positionals }) {
    const root = await resolveExistingRoot(values.root);
    const n = values.lines === undefined ? 50 : Number(values.lines);
    if (!Number.isSafeInteger(n) || n <= 0) {
      throw new CotalError(
        "usage",
        `--lines takes a positive whole number; ${
          JSON.stringify(String(values.lines))
        } is not one.`,
      );
    }
    const logs = await logsByName(root);
    const named = [...logs.entries()].filter(([k]) => !/\.[0-9a-f]{32}$/.test(k)).sort();
    if (positionals[0] === undefined) {
      // No component: what there is to read, as status names it (newcomer pass 11).
      const list = await Promise.all(named.map(async ([component, file]) => ({
        component,
        file,
        bytes: (await Deno.stat(file).catch(() => undefined))?.size ?? 0,
      })));
      printResult(
        denoIo(),
        { json: values.json === true },
        { root, logs: list },
        (v) =>
          v.logs.length
            ? [
              ...v.logs.map((l) =>
                `${safeText(l.component).padEnd(32)} ${String(l.bytes).padStart(10)} bytes`
              ),
              `read one: ${cotalCommand()} logs <component> [--lines n]`,
            ].join("\n")
            : `no logs yet under ${safeText(root)}`,
      );
      return;
    }
    const path = logs.get(positionals[0]);
    if (!path) {
      throw new CotalError(
        "log_unknown",
        `No log for ${JSON.stringify(positionals[0])} under ${root}; the logs are: ${
          named.map(([k]) => k).join(", ") || "none yet"
        } (an agent's own output is 'cotal attach <name>').`,
      );
    }
    const lines = await tail(path, n);
    // --json as every read command takes it (newcomer pass 8): the lines exact, JSON-escaped.
    printResult(
      denoIo(),
      { json: values.json === true },
      { component: positionals[0], file: path, lines },
      (v) => v.lines.map((l) => safeText(l)).join("\n"),
    );
  },
});

registry.register([logsCommand]);
