/**
 * `cotal attach` passes an agent's rendering controls and drops what acts beyond the screen,
 * in every spelling and however the stream is chunked (lib/cli/attach_filter.ts).
 */
import assert from "node:assert/strict";
import { ATTACH_RESET, AttachFilter } from "../../lib/cli/attach_filter.ts";

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

Deno.test("attach filter - red team 24: a C1 control that interrupts an escape, a CSI or a string is dropped, not passed", () => {
  const b = (...parts: (string | number[])[]) =>
    Uint8Array.from(parts.flatMap((p) => typeof p === "string" ? [...ENC.encode(p)] : p));
  const OSC = [0xc2, 0x9d];
  const CSI = [0xc2, 0x9b];
  const cases: [Uint8Array, string][] = [
    // ESC U+009D: a terminal cancels the ESC and reads OSC 0 (title) or OSC 52 (clipboard).
    [b("a\x1b", OSC, "0;PWNED\x07b"), "ab"],
    [b("a\x1b", OSC, "52;c;Y3VybCBldmlsIHwgc2gK\x07b"), "ab"],
    // ESC U+009B: CSI window operations.
    [b("a\x1b", CSI, "8;5;5t\x1b", CSI, "21tb"), "ab"],
    // Inside a dropped string, ESC U+009D opens another.
    [b("a\x1b]0;dropped\x1b", OSC, "2;PWNED\x07b"), "ab"],
    // U+009D inside a CSI cancels it and opens an OSC.
    [b("a\x1b[", OSC, "0;PWNED\x07b"), "ab"],
    // Raw 8-bit C1 (a terminal in 8-bit mode reads OSC), and a stray continuation byte.
    [b("a", [0x9d], "0;X", [0x07], "b"), "a0;X\x07b"],
    [b("a", [0x9b], "21tb"), "a21tb"],
    // screen/tmux window name: the escape goes, the text is plain text.
    [b("a\x1bkPWNED\x1b\\b"), "aPWNEDb"],
    // Full reset, and a charset other than ASCII or line drawing.
    [b("a\x1bcb\x1b(Kc"), "abc"],
    // Malformed UTF-8: an overlong lead, a character cut short by an escape.
    [b("a", [0xc0, 0xaf], "b", [0xe4, 0xbd], "\x1b", OSC, "0;x\x07c"), "abc"],
  ];
  for (const [input, want] of cases) {
    const hex = [...input].map((x) => x.toString(16).padStart(2, "0")).join(" ");
    assert.equal(filtered(input), want, hex);
  }
});

Deno.test("attach filter - the reset written at detach undoes the modes an agent may leave on", () => {
  // What red team 24 left in the operator's terminal after Ctrl-]: hidden text, line drawing,
  // mouse reporting, the alternate screen, bracketed paste, a one-line scroll region.
  const left = "\x1b[8m\x1b(0\x1b[?1000h\x1b[?1006h\x1b[?1049h\x1b[?2004h\x1b[1;1r";
  assert.equal(filtered(left), left, "rendering modes pass while attached");
  for (
    const undo of [
      "\x1b[0m",
      "\x1b(B",
      "\x1b[?1000l",
      "\x1b[?1006l",
      "\x1b[?1049l",
      "\x1b[?2004l",
      "\x1b[r",
    ]
  ) {
    assert.ok(ATTACH_RESET.includes(undo), JSON.stringify(undo));
  }
  // The reset itself is made of sequences the filter passes: nothing in it acts beyond the screen.
  assert.equal(filtered(ATTACH_RESET), ATTACH_RESET);
});

Deno.test("attach filter - red team 25: modes, keyboard protocols and reports that outlive the session or act beyond the screen are dropped", () => {
  const E = "\x1b";
  const dropped = [
    `${E}[?40h${E}[?3h`, // allow 132 columns, then DECCOLM: the window is resized
    `${E}[?1043h`, // raise the window on every bell
    `${E}[?1042h`, // urgency hint on bell
    `${E}[?1001h`, // highlight mouse tracking: xterm hangs on a click
    `${E}[?9h`, // X10 mouse: clicks typed into the shell after detach
    `${E}[2h`, // keyboard locked
    `${E}[12l`, // local echo
    `${E}[20h`, // newline mode
    `${E}[?5h`, // reverse video
    `${E}[?2l`, // VT52: no reset parses after it
    `${E}[>4;2m`, // modifyOtherKeys: Ctrl-C reaches the shell as an escape code
    `${E}[>31u`, // kitty keyboard flags pushed
    `${E}[=31;1u`, // kitty keyboard flags set
    `${E}[?1051h`, // Sun function keys
    `${E}[?1034h`, // eight-bit meta
    `${E}[?1046l`, // alternate screen switching off
    `${E}[>0q`, // version report (a DCS into the input)
    `${E}[?67h`, // backarrow sends BS
    `${E}[?1000;3h`, // an allowed mode with a forbidden one beside it
    `${E}[1?h`, // a marker out of place
    `${E}[5q`, // LEDs
    `${E}[3n`, // an unknown report
  ];
  for (const seq of dropped) assert.equal(filtered(`a${seq}b`), "ab", JSON.stringify(seq));
  // Overlong and surrogate UTF-8 (E0 82 9D spells U+009D, OSC, to a lenient decoder).
  for (const raw of [[0xe0, 0x82, 0x9d], [0xf0, 0x80, 0x80, 0x9b], [0xed, 0xa0, 0x80]]) {
    assert.equal(filtered(Uint8Array.from([0x61, ...raw, 0x62])), "ab", JSON.stringify(raw));
  }
  // What drawing needs still passes, and each mode it may set is undone at detach.
  for (
    const seq of [
      `${E}[?1049h`,
      `${E}[?1000h${E}[?1006h`,
      `${E}[?2004h`,
      `${E}[?25l`,
      `${E}[4h`,
      `${E}[5 q`,
      `${E}[6n`,
      `${E}[1;31;48:5:17m`,
      `${E}[2;20r`,
      `${E}[u`,
    ]
  ) assert.equal(filtered(seq), seq, JSON.stringify(seq));
  for (const undo of ["?1049l", "?1000l", "?1006l", "?2004l", "?25h", "[4l", "[r", "?6l"]) {
    assert.ok(ATTACH_RESET.includes(undo), undo);
  }
});
