import assert from "node:assert/strict";
import { safeText } from "../../lib/safe_text.ts";
import { bufferIo, printError, printResult } from "../../lib/cli/output.ts";
import { CotalError } from "../../lib/errors.ts";

/** What an agent prints to own an operator's terminal, one of each kind. */
const HOSTILE = [
  "\x1b]0;pwned title\x07", // OSC 0: window title
  "\x1b]52;c;cm0gLXJmIH4=\x07", // OSC 52: clipboard write
  "\x1b[2J\x1b[H", // CSI: clear screen, home
  "\x1bP+q544e\x1b\\", // DCS: terminfo query
  "\x9b31m", // C1 CSI
  "\r", // carriage return over the line
  "line\nfake: operator said", // a forged line
  "\u202eevil\u202c", // bidi override
  "\x00\x07\x7f",
].join("");

Deno.test("cli - control characters from agents are shown, never sent to the terminal", () => {
  const shown = safeText(HOSTILE);
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(shown, /[\x00-\x1f\x7f-\x9f\u202a-\u202e]/);
  assert.match(shown, /\\x1b\]0;pwned title\\x07/);
  assert.match(shown, /\\x9b31m/);
  assert.match(shown, /line\\x0afake/);
  assert.match(shown, /\\u\{202e\}evil/);
  // Multi-line output keeps its own lines but nothing else.
  assert.equal(safeText("a\n\tb\x1b[2J", { lines: true }), "a\n\tb\\x1b[2J");
  assert.equal(safeText("plain text, ümlauts, 漢字"), "plain text, ümlauts, 漢字");
});

Deno.test("cli - printResult and printError render agent text safely; --json stays exact", () => {
  const io = bufferIo();
  printResult(io, { json: false }, { name: HOSTILE }, (v) => `agent ${v.name}`);
  printError(io, { json: false }, new CotalError("spawn_failed", `last output: ${HOSTILE}`));
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(io.out + io.err, /[\x00-\x09\x0b-\x1f\x7f-\x9f]/);
  const json = bufferIo();
  printResult(json, { json: true }, { name: HOSTILE });
  assert.equal(JSON.parse(json.out).name, HOSTILE);
});
