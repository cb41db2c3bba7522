import assert from "node:assert/strict";
import { screenText } from "../../lib/manager/managed_agent.ts";

Deno.test("manager - an agent's last output reads as its words: cursor moves as spaces, control sequences dropped (newcomer pass 9)", () => {
  // What a full-screen harness wrote before it exited, as ps showed it run together.
  const raw = "Note:\x1b[1CClaude\x1b[1CCode\x1b[3Cmight\x1b[1Cnot | see\x1b[>0q\x1b(B\x0f" +
    "\x1b[>4m\x1b[<u\x1b7\x1b8\x1b]0;a title\x07\x1bP+q544e\x1b\\\x1b[?1049h end\r\nnext";
  assert.equal(screenText(raw), "Note: Claude Code   might not | see end\r\nnext");
  // Words placed by absolute moves (to a column, to a row and column, a line down) are apart.
  assert.equal(
    screenText("Please\x1b[8Gcheck\x1b[3;14Hyour\x1b[1Binternet"),
    "Please check your internet",
  );
  // Plain text is kept as it is.
  assert.equal(screenText("plain words, ümlauts\tand tabs\n"), "plain words, ümlauts\tand tabs\n");
});

Deno.test("manager - strings an agent never ends cost the screening time in proportion to their length, not its square (red team 39)", () => {
  // Every start of an OSC or DCS scanned to the end of the tail: 32,768 of them took 1.2 s of
  // the supervisor's thread. Compared with itself at a sixteenth of the length (same run, the
  // best of five): linear is ~16 times, the old pattern ~180 times (4096 vs 65536: 27 ms, 4.9 s).
  const cost = (n: number) => {
    const s = "\x1b]".repeat(n / 2) + "\x1bP".repeat(n / 2);
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      assert.equal(screenText(s), "");
      best = Math.min(best, performance.now() - t0);
    }
    return best;
  };
  cost(4_096); // warm
  const small = cost(4_096);
  const large = cost(65_536);
  assert.ok(large / Math.max(small, 0.2) < 64, `16x the text cost ${(large / small).toFixed(1)}x`);
  // An ended one is still dropped whole, an unended one leaves its text visible and inert.
  assert.equal(screenText("a\x1b]0;title\x07b\x1b]2;x"), "ab2;x");
});
