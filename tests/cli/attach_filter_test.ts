/**
 * `cotal attach` passes an agent's rendering controls and drops what acts beyond the screen,
 * in every spelling and however the stream is chunked (lib/cli/attach_filter.ts).
 */
import assert from "node:assert/strict";
import { AttachFilter } from "../../lib/cli/attach_filter.ts";

const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** The filter's output for `input`, fed whole and then one byte at a time (the same both ways). */
function filtered(input: string | Uint8Array): string {
  const bytes = typeof input === "string" ? ENC.encode(input) : input;
  const whole = DEC.decode(new AttachFilter().push(bytes));
  const f = new AttachFilter();
  const parts: number[] = [];
  for (const b of bytes) parts.push(...f.push(Uint8Array.of(b)));
  assert.equal(DEC.decode(Uint8Array.from(parts)), whole, "chunking changed the output");
  return whole;
}

Deno.test("attach filter - rendering passes: text, UTF-8, colours, cursor moves, erases, modes, ESC 7/8", () => {
  for (
    const s of [
      "plain text\r\n",
      "é ü 你好 🙂 ©",
      "\x1b[1;31mred\x1b[0m",
      "\x1b[0G\x1b[2K\x1b[J\x1b[10;5H",
      "\x1b[?1049h\x1b[?25l\x1b[?2004h",
      "\x1b7saved\x1b8",
      "\x1b(Bascii",
      "\x1b[6n",
    ]
  ) assert.equal(filtered(s), s, JSON.stringify(s));
});

Deno.test("attach filter - OSC, DCS, SOS, PM and APC strings are dropped, however terminated", () => {
  const cases: [string, string][] = [
    ["a\x1b]52;c;ZXZpbA==\x07b", "ab"], // clipboard, BEL-terminated
    ["a\x1b]0;owned title\x1b\\b", "ab"], // title, ST-terminated
    ["a\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\b", "alinkb"], // hyperlink
    ["a\x1bP1$r0m\x1b\\b", "ab"], // DCS
    ["a\x1bXsos\x1b\\b\x1b^pm\x1b\\c\x1b_apc\x1b\\d", "abcd"],
    // An unterminated string is cut by the next ESC, which is then acted on.
    ["a\x1b]0;title\x1b[1mbold", "a\x1b[1mbold"],
  ];
  for (const [input, want] of cases) assert.equal(filtered(input), want, JSON.stringify(input));
});

Deno.test("attach filter - C1 forms and window operations are dropped", () => {
  const c1 = (...parts: (string | number[])[]) =>
    Uint8Array.from(parts.flatMap((p) => typeof p === "string" ? [...ENC.encode(p)] : p));
  // U+009D OSC ... U+009C ST, U+0090 DCS ... BEL, a stray U+0085 NEL.
  assert.equal(filtered(c1("a", [0xc2, 0x9d], "52;c;x", [0xc2, 0x9c], "b")), "ab");
  assert.equal(filtered(c1("a", [0xc2, 0x90], "q", [0x07], "b")), "ab");
  assert.equal(filtered(c1("a", [0xc2, 0x85], "b")), "ab");
  // U+009B CSI: judged as ESC [.
  assert.equal(filtered(c1("a", [0xc2, 0x9b], "1mb")), "a\x1b[1mb");
  assert.equal(filtered(c1("a", [0xc2, 0x9b], "21tb")), "ab");
  // Window operations: title report, resize, move.
  for (const s of ["\x1b[21t", "\x1b[8;100;100t", "\x1b[3;0;0t"]) {
    assert.equal(filtered(`a${s}b`), "ab", JSON.stringify(s));
  }
  // An overlong CSI is dropped whole, up to its final byte; it is not held for ever.
  assert.equal(filtered(`a\x1b[${"1;".repeat(40)}mb`), "ab");
  assert.equal(filtered(`a\x1b[${"1;".repeat(40)}\r\nb`), "a\r\nb");
});
