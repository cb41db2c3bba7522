/**
 * What `cotal attach` lets through of an agent's terminal output. Attaching is driving a
 * terminal, so the agent's rendering controls pass (text, colours, cursor moves, erases,
 * modes). The sequences that act beyond the screen do not: OSC (window title, clipboard
 * through OSC 52, hyperlinks, palette), DCS, SOS, PM and APC strings, whatever terminates them,
 * CSI window operations (`t`: resize, move, title reports), and the C1 forms of all of these.
 * A stream filter: a sequence split across chunks is judged whole.
 *
 * @module
 */

const ESC = 0x1b;
const BEL = 0x07;
/** Introducers (after ESC) of the strings that are dropped: OSC, DCS, SOS, PM, APC. */
const STRING_INTRODUCERS = new Set([0x5d, 0x50, 0x58, 0x5e, 0x5f]);
/** The same as C1 controls (U+0090 DCS, U+0098 SOS, U+009D OSC, U+009E PM, U+009F APC). */
const C1_STRINGS = new Set([0x90, 0x98, 0x9d, 0x9e, 0x9f]);
/** A CSI longer than this is dropped whole (its bytes skipped up to its final byte). */
const MAX_CSI = 64;

type State = "ground" | "esc" | "csi" | "csi-skip" | "string" | "string-esc" | "c2";

/** A streaming filter over one agent's output. */
export class AttachFilter {
  #state: State = "ground";
  #csi: number[] = [];
  // The state a held 0xC2 (the first byte of a UTF-8 C1 control) came from.
  #c2From: State = "ground";

  /** The bytes of `chunk` that may reach the operator's terminal. */
  push(chunk: Uint8Array): Uint8Array {
    const out: number[] = [];
    for (const b of chunk) this.#byte(b, out);
    return Uint8Array.from(out);
  }

  #byte(b: number, out: number[]): void {
    switch (this.#state) {
      case "ground":
        if (b === ESC) this.#state = "esc";
        else if (b === 0xc2) {
          this.#c2From = "ground";
          this.#state = "c2";
        } else out.push(b);
        return;
      case "c2":
        // U+0080..U+009F: a C1 control, never passed; a string introducer starts a dropped
        // string, CSI (U+009B) becomes ESC [ and is judged as one.
        this.#state = this.#c2From === "string" ? "string" : "ground";
        if (b >= 0x80 && b <= 0x9f) {
          if (this.#c2From === "string") {
            if (b === 0x9c) this.#state = "ground"; // ST ends the string.
          } else if (C1_STRINGS.has(b)) this.#state = "string";
          else if (b === 0x9b) this.#startCsi();
          return;
        }
        if (this.#c2From !== "string") out.push(0xc2);
        this.#byte(b, out);
        return;
      case "esc":
        if (STRING_INTRODUCERS.has(b)) this.#state = "string";
        else if (b === 0x5b) this.#startCsi();
        else if (b === ESC) out.push(ESC); // ESC ESC: the first stands alone.
        else {
          out.push(ESC, b);
          this.#state = "ground";
        }
        return;
      case "csi":
        this.#csi.push(b);
        if (b >= 0x40 && b <= 0x7e) {
          // Window operations (`t`) move, resize, or report the title into the input.
          if (b !== 0x74) out.push(...this.#csi);
          this.#csi = [];
          this.#state = "ground";
        } else if (b < 0x20) {
          // A control inside: the sequence is dropped, the control acted on.
          this.#csi = [];
          this.#state = "ground";
          this.#byte(b, out);
        } else if (this.#csi.length > MAX_CSI) {
          this.#csi = [];
          this.#state = "csi-skip";
        }
        return;
      case "csi-skip":
        if (b >= 0x40 && b <= 0x7e) this.#state = "ground";
        else if (b < 0x20) {
          this.#state = "ground";
          this.#byte(b, out);
        }
        return;
      case "string":
        if (b === BEL) this.#state = "ground";
        else if (b === ESC) this.#state = "string-esc";
        else if (b === 0xc2) {
          this.#c2From = "string";
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

  #startCsi(): void {
    this.#csi = [ESC, 0x5b];
    this.#state = "csi";
  }
}
