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
