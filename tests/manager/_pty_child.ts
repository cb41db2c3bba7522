/** Spawns `tty` through the pty runtime and prints what it saw; run with narrow permissions. */
import { createRuntime } from "../../lib/manager/pty_runtime.ts";

const runtime = await createRuntime("pty");
const h = await runtime.spawn({ command: "/usr/bin/tty", args: [], env: {} }, {
  cols: 80,
  rows: 24,
});
const dec = new TextDecoder();
let out = "";
h.onData((d) => (out += dec.decode(d, { stream: true })));
const exit = await new Promise((r) => h.onExit(r));
console.log(JSON.stringify({ out, exit }));
