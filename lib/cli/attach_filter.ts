/**
 * What `cotal attach` lets through of an agent's terminal output: an allowlist. Attaching is
 * driving a terminal, so the agent's rendering passes: UTF-8 text, the C0 controls a screen
 * uses (BEL, BS, HT, LF, VT, FF, CR, SO, SI), CSI sequences that draw, move, erase or set one of
 * the listed modes, and a few two-byte escapes (save/restore cursor, keypad modes, index, the ASCII
 * and line-drawing character sets). Everything else is dropped, whole: OSC (window title,
 * clipboard through OSC 52, hyperlinks, palette), DCS, SOS, PM and APC strings and whatever
 * terminates them, CSI window operations (`t`) and any other final byte, every other escape
 * (`ESC k` names a screen or tmux window, `ESC c` resets the terminal), C1 controls in either
 * form (UTF-8 U+0080..U+009F, or a raw 8-bit byte), and malformed UTF-8. A C1 control or an
 * escape that interrupts a sequence cancels it, as it does in a terminal, and is then judged on
 * its own (red team 24 passed ESC U+009D, which a terminal reads as OSC, through the
 * interrupted escape). A stream filter: a sequence split across chunks is judged whole.
 *
 * Modes the agent set legitimately (the alternate screen, mouse reporting, a scroll region)
 * outlive the session in the operator's terminal: {@linkcode ATTACH_RESET} undoes them at detach.
 *
 * @module
 */

const ESC = 0x1b;
const BEL = 0x07;
/** C0 controls that pass: BEL, BS, HT, LF, VT, FF, CR, and SO/SI (the G1/G0 character set). */
const C0_PASSED = new Set([0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f]);
/** Introducers (after ESC) of the strings that are dropped: OSC, DCS, SOS, PM, APC. */
const STRING_INTRODUCERS = new Set([0x5d, 0x50, 0x58, 0x5e, 0x5f]);
/** The same as C1 controls (U+0090 DCS, U+0098 SOS, U+009D OSC, U+009E PM, U+009F APC). */
const C1_STRINGS = new Set([0x90, 0x98, 0x9d, 0x9e, 0x9f]);
/** Escapes of one byte after ESC that pass: DECSC, DECRC, DECKPAM, DECKPNM, IND, NEL, RI. */
const ESC_PASSED = new Set([..."78=>DEM"].map((c) => c.charCodeAt(0)));
/** Character sets that may be designated with `ESC (` or `ESC )`: ASCII and line drawing. */
const CHARSETS_PASSED = new Set([..."B0"].map((c) => c.charCodeAt(0)));
/**
 * CSI final bytes that pass with plain numeric parameters: cursor moves, erases, inserts and
 * deletes, scrolling, tab stops, SGR, the scroll region. Modes (`h`/`l`), reports (`n`, `c`),
 * cursor restore (`u`) and cursor style (` q`) pass only in the forms `csiPasses` names. Not `t`
 * (window operations) nor the rest (printing, soft reset, rectangle and checksum operations).
 */
const CSI_DRAWING = new Set([..."@ABCDEFGHIJKLMPSTXZ`abdefgmrs"].map((c) => c.charCodeAt(0)));
/**
 * DEC private modes (`CSI ? n h|l`) that pass: cursor keys, origin, autowrap, cursor blink and
 * visibility, the alternate screen, mouse reporting in the usual encodings, focus events,
 * bracketed paste, synchronized output. Not 132 columns (`?3`, it resizes the window), VT52
 * (`?2`, after which no reset parses), reverse video, highlight or X10 mouse, raise or urgency
 * on bell, meta and keyboard variants (red team 25): each outlives the session or acts beyond
 * the screen. Every one that passes is switched off by {@linkcode ATTACH_RESET}.
 */
const PRIVATE_MODES = new Set([
  1,
  6,
  7,
  12,
  25,
  47,
  1000,
  1002,
  1003,
  1004,
  1005,
  1006,
  1015,
  1047,
  1048,
  1049,
  2004,
  2026,
]);
/** ANSI modes (`CSI n h|l`) that pass: insert (4). Not keyboard lock, local echo or newline. */
const ANSI_MODES = new Set([4]);

/**
 * Whether a whole CSI (`ESC [` params intermediates final) is rendering that may pass. An
 * allowlist by final byte, private marker, parameters and intermediates: a terminal reads far
 * more than draws (red team 25 resized and raised the window, locked the keyboard and switched
 * the keys to escape codes through modes that passed on their final byte).
 */
function csiPasses(seq: readonly number[]): boolean {
  const body = String.fromCharCode(...seq.slice(2, -1));
  const final = String.fromCharCode(seq[seq.length - 1]);
  const m = /^([<=>?]?)([0-9;:]*)([ -/]*)$/.exec(body);
  if (!m) return false;
  const [, marker, params, inter] = m;
  const numbers = params === "" ? [] : params.split(/[;:]/).map(Number);
  if (inter !== "") return inter === " " && final === "q" && marker === ""; // cursor style
  if (marker === "?") {
    return (final === "h" || final === "l") && numbers.length > 0 &&
      numbers.every((n) => PRIVATE_MODES.has(n));
  }
  if (marker !== "") return false; // `>`, `<`, `=`: keyboard protocols, version reports
  switch (final) {
    case "h":
    case "l":
      return numbers.length > 0 && numbers.every((n) => ANSI_MODES.has(n));
    case "n":
      return params === "5" || params === "6"; // status and cursor position reports
    case "c":
      return params === "" || params === "0"; // device attributes
    case "u":
      return params === ""; // restore cursor
    default:
      return CSI_DRAWING.has(final.charCodeAt(0));
  }
}
/** A CSI longer than this is dropped whole (its bytes skipped up to its final byte). */
const MAX_CSI = 64;

/**
 * What `cotal attach` writes when it detaches: attributes, character set, scroll region and
 * cursor back to normal, the alternate screen left, mouse reporting, focus events and
 * bracketed paste off, cursor keys and keypad normal.
 */
export const ATTACH_RESET = "\x1b[0m\x1b(B\x1b)B\x0f\x1b[r\x1b[?6l\x1b[4l\x1b[?25h" +
  "\x1b[?1049l\x1b[?1047l\x1b[?47l" +
  "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l" +
  "\x1b[?2004l\x1b[?2026l\x1b[?1l\x1b>\x1b[?7h";

type State =
  | "ground"
  | "utf8"
  | "esc"
  | "charset"
  | "csi"
  | "csi-skip"
  | "string"
  | "string-esc"
  | "c2";

/** A streaming filter over one agent's output. */
export class AttachFilter {
  #state: State = "ground";
  #csi: number[] = [];
  /** Continuation bytes a UTF-8 character still needs, and its bytes so far. */
  #need = 0;
  #utf8: number[] = [];
  /** The charset designator (`(` or `)`) awaiting its final byte. */
  #designator = 0;
  /** Whether a held 0xC2 (the first byte of a UTF-8 C1 control) came from inside a string. */
  #c2InString = false;

  /** The bytes of `chunk` that may reach the operator's terminal. */
  push(chunk: Uint8Array): Uint8Array {
    const out: number[] = [];
    for (const b of chunk) this.#byte(b, out);
    return Uint8Array.from(out);
  }

  #byte(b: number, out: number[]): void {
    switch (this.#state) {
      case "ground":
        return this.#ground(b, out);
      case "utf8":
        if (b >= 0x80 && b <= 0xbf && this.#fits(b)) {
          this.#utf8.push(b);
          if (--this.#need === 0) {
            out.push(...this.#utf8);
            this.#utf8 = [];
            this.#state = "ground";
          }
          return;
        }
        // A character cut short is malformed: dropped, and this byte judged afresh.
        this.#utf8 = [];
        this.#state = "ground";
        return this.#ground(b, out);
      case "c2":
        // U+0080..U+009F: a C1 control, never passed. A string introducer starts a dropped
        // string, CSI (U+009B) becomes ESC [ and is judged as one, ST ends a string.
        if (b >= 0x80 && b <= 0x9f) {
          if (this.#c2InString) this.#state = b === 0x9c ? "ground" : "string";
          else if (C1_STRINGS.has(b)) this.#state = "string";
          else if (b === 0x9b) this.#startCsi();
          else this.#state = "ground";
          return;
        }
        if (this.#c2InString) {
          this.#state = "string";
          return this.#byte(b, out);
        }
        // U+00A0..U+00BF: a character like any other.
        if (b >= 0xa0 && b <= 0xbf) {
          out.push(0xc2, b);
          this.#state = "ground";
          return;
        }
        this.#state = "ground";
        return this.#ground(b, out);
      case "esc":
        if (STRING_INTRODUCERS.has(b)) this.#state = "string";
        else if (b === 0x5b) this.#startCsi();
        else if (ESC_PASSED.has(b)) {
          out.push(ESC, b);
          this.#state = "ground";
        } else if (b === 0x28 || b === 0x29) {
          this.#designator = b;
          this.#state = "charset";
        } else if (b >= 0x20 && b <= 0x7e) {
          // Any other escape (ESC k, ESC c, ESC #, ...): dropped with its byte.
          this.#state = "ground";
        } else {
          // A control or a non-ASCII byte cancels the escape and is judged on its own.
          this.#state = "ground";
          this.#ground(b, out);
        }
        return;
      case "charset":
        this.#state = "ground";
        if (CHARSETS_PASSED.has(b)) out.push(ESC, this.#designator, b);
        else if (b < 0x20 || b >= 0x7f) this.#ground(b, out);
        return;
      case "csi":
        if (b >= 0x40 && b <= 0x7e) {
          this.#csi.push(b);
          if (csiPasses(this.#csi)) out.push(...this.#csi);
          this.#csi = [];
          this.#state = "ground";
        } else if (b >= 0x20 && b <= 0x3f) {
          this.#csi.push(b);
          if (this.#csi.length > MAX_CSI) {
            this.#csi = [];
            this.#state = "csi-skip";
          }
        } else {
          // A control, DEL or a non-ASCII byte inside: the sequence is dropped, the byte judged
          // on its own (a terminal cancels the CSI and acts on it).
          this.#csi = [];
          this.#state = "ground";
          if (b !== 0x7f) this.#ground(b, out);
        }
        return;
      case "csi-skip":
        if (b >= 0x40 && b <= 0x7e) this.#state = "ground";
        else if (b < 0x20 || b >= 0x80) {
          this.#state = "ground";
          this.#ground(b, out);
        }
        return;
      case "string":
        if (b === BEL) this.#state = "ground";
        else if (b === ESC) this.#state = "string-esc";
        else if (b === 0xc2) {
          this.#c2InString = true;
          this.#state = "c2";
        }
        return;
      case "string-esc":
        // ESC \ is the terminator; any other ESC also ends the string and starts anew.
        this.#state = "ground";
        if (b !== 0x5c) {
          this.#state = "esc";
          this.#byte(b, out);
        }
        return;
    }
  }

  #ground(b: number, out: number[]): void {
    if (b === ESC) {
      this.#state = "esc";
    } else if (b < 0x20) {
      if (C0_PASSED.has(b)) out.push(b);
    } else if (b < 0x7f) {
      out.push(b);
    } else if (b === 0xc2) {
      this.#c2InString = false;
      this.#state = "c2";
    } else if (b >= 0xc3 && b <= 0xf4) {
      this.#utf8 = [b];
      this.#need = b < 0xe0 ? 1 : b < 0xf0 ? 2 : 3;
      this.#state = "utf8";
    }
    // DEL, a stray continuation byte (a raw 8-bit C1 control among them), 0xC0, 0xC1 and
    // 0xF5..0xFF: never text, dropped.
  }

  /**
   * Whether continuation byte `b` may come next: the second byte of a character bounds it, so
   * no overlong form (E0 82 9D spells U+009D), surrogate or value past U+10FFFF passes.
   */
  #fits(b: number): boolean {
    if (this.#utf8.length !== 1) return true;
    const lead = this.#utf8[0];
    if (lead === 0xe0) return b >= 0xa0;
    if (lead === 0xed) return b <= 0x9f;
    if (lead === 0xf0) return b >= 0x90;
    if (lead === 0xf4) return b <= 0x8f;
    return true;
  }

  #startCsi(): void {
    this.#csi = [ESC, 0x5b];
    this.#state = "csi";
  }
}
