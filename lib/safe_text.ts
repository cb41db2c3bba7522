/**
 * Text that reaches an operator's terminal from an agent, a message or a log: every control
 * character rendered visibly, so an escape sequence (a window title, a clipboard write through
 * OSC 52, a screen clear, a DCS string) is shown as text and never acted on. `--json` output
 * stays exact (JSON escapes it). `cotal attach` drives a terminal, so it passes the agent's
 * rendering controls and drops the rest (lib/cli/attach_filter.ts).
 *
 * @module
 */

/** C0 and C1 controls, DEL, and the bidirectional overrides that reorder what is shown. */
// deno-lint-ignore no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_KEEP_LINES =
  // deno-lint-ignore no-control-regex
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function visible(c: string): string {
  const code = c.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;
}

/**
 * `text` with every control character shown as `\xNN` (or `\u{NNNN}`). With `lines`, newlines
 * and tabs are kept (multi-line output built from checked pieces); without, a newline in an
 * untrusted field cannot fake a line of its own.
 */
export function safeText(text: string, opts: { lines?: boolean } = {}): string {
  return String(text).replace(opts.lines ? UNSAFE_KEEP_LINES : UNSAFE, visible);
}
